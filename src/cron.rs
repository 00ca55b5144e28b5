//! Cron expressions and the calendar (guide, "Schedules"): parsing five fields (minute, hour, day of
//! month, month, day of week), or six with seconds first, and finding the next local time that
//! matches. Pure: time zones are applied by the caller (`api::schedules`), which converts local
//! times to instants with the server's time zone data.
//!
//! The fields take what Vixie cron takes: `*`, numbers, ranges `a-b`, steps `*/n` and `a-b/n`,
//! lists of those, month and weekday names (`jan`, `mon`), 0 or 7 for Sunday; and the shorthands
//! `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`) and `@hourly`. When both
//! the day of month and the day of week are restricted, a day matching either matches, as in cron.

use std::fmt;

/// A parsed expression: for each field, the set of values it matches, as bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Whether the day of month and the day of week were each restricted (not `*`).
    days_restricted: bool,
    weekdays_restricted: bool,
}

/// Why an expression was refused: a sentence to follow "cron ".
#[derive(Debug, PartialEq, Eq)]
pub struct CronError(pub String);

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const SECOND: Field = Field { name: "seconds", min: 0, max: 59, names: &[] };
const MINUTE: Field = Field { name: "minute", min: 0, max: 59, names: &[] };
const HOUR: Field = Field { name: "hour", min: 0, max: 23, names: &[] };
const DAY: Field = Field { name: "day of month", min: 1, max: 31, names: &[] };
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
};
// 7 is Sunday too; it is folded onto 0 after parsing.
const WEEKDAY: Field =
    Field { name: "day of week", min: 0, max: 7, names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"] };

impl Cron {
    pub fn parse(text: &str) -> Result<Cron, CronError> {
        let text = text.trim();
        let expanded = match text.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *".to_owned(),
            "@monthly" => "0 0 1 * *".to_owned(),
            "@weekly" => "0 0 * * 0".to_owned(),
            "@daily" | "@midnight" => "0 0 * * *".to_owned(),
            "@hourly" => "0 * * * *".to_owned(),
            other if other.starts_with('@') => {
                return Err(CronError(format!("has an unknown shorthand \"{text}\"")));
            }
            _ => text.to_owned(),
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (seconds, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            n => return Err(CronError(format!("must have 5 fields, or 6 with seconds first; it has {n}"))),
        };
        let weekdays = parse_field(rest[4], &WEEKDAY)?;
        let weekdays = (weekdays & 0x7f) | u64::from(weekdays & (1 << 7) != 0);
        let cron = Cron {
            seconds: parse_field(seconds, &SECOND)?,
            minutes: parse_field(rest[0], &MINUTE)?,
            hours: parse_field(rest[1], &HOUR)? as u32,
            days: parse_field(rest[2], &DAY)? as u32,
            months: parse_field(rest[3], &MONTH)? as u16,
            weekdays: weekdays as u8,
            days_restricted: !rest[2].starts_with('*'),
            weekdays_restricted: !rest[4].starts_with('*'),
        };
        if cron.next_after(Civil::new(2000, 1, 1, 0, 0, 0)).is_none() {
            return Err(CronError("never matches a day of the calendar".to_owned()));
        }
        Ok(cron)
    }

    /// The first time after `after` (strictly) that the expression matches, within the next
    /// `SEARCH_YEARS` years (any expression that matches at all matches within four).
    pub fn next_after(&self, after: Civil) -> Option<Civil> {
        const SEARCH_YEARS: i32 = 5;
        let mut t = after.plus_seconds(1);
        let until = after.year + SEARCH_YEARS;
        while t.year <= until {
            if self.months & (1 << t.month) == 0 {
                t = Civil::new(t.year, t.month, 1, 0, 0, 0).plus_months(1);
            } else if !self.day_matches(t) {
                t = Civil::new(t.year, t.month, t.day, 0, 0, 0).plus_days(1);
            } else if self.hours & (1 << t.hour) == 0 {
                t = Civil::new(t.year, t.month, t.day, t.hour, 0, 0).plus_seconds(3600);
            } else if self.minutes & (1 << t.minute) == 0 {
                t = Civil::new(t.year, t.month, t.day, t.hour, t.minute, 0).plus_seconds(60);
            } else if self.seconds & (1 << t.second) == 0 {
                t = t.plus_seconds(1);
            } else {
                return Some(t);
            }
        }
        None
    }

    fn day_matches(&self, t: Civil) -> bool {
        let by_day = self.days & (1 << t.day) != 0;
        let by_weekday = self.weekdays & (1 << t.weekday()) != 0;
        match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => by_day || by_weekday,
            _ => by_day && by_weekday,
        }
    }
}

/// One field's set of values as bits (bit n: value n).
fn parse_field(text: &str, field: &Field) -> Result<u64, CronError> {
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .ok()
                    .filter(|s| *s >= 1)
                    .ok_or_else(|| CronError(format!("has a bad step \"{part}\" in the {} field", field.name)))?;
                (range, step)
            }
            None => (part, 1),
        };
        let (low, high) = if range == "*" {
            (field.min, field.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, field)?, value(b, field)?)
        } else {
            let v = value(range, field)?;
            // `5/15` means from 5 to the end in steps of 15, as in cron.
            (v, if step > 1 { field.max } else { v })
        };
        if low > high {
            return Err(CronError(format!("has a range \"{range}\" that runs backwards in the {} field", field.name)));
        }
        for v in (low..=high).step_by(step as usize) {
            bits |= 1 << v;
        }
    }
    Ok(bits)
}

fn value(text: &str, field: &Field) -> Result<u32, CronError> {
    let lower = text.to_ascii_lowercase();
    let v = match field.names.iter().position(|name| *name == lower) {
        Some(i) => i as u32 + if field.min == 1 { 1 } else { 0 },
        None => text
            .parse::<u32>()
            .map_err(|_| CronError(format!("has \"{text}\" in the {} field, which is not a value", field.name)))?,
    };
    if v < field.min || v > field.max {
        return Err(CronError(format!("has {v} in the {} field, outside {} to {}", field.name, field.min, field.max)));
    }
    Ok(v)
}

/// A local (wall-clock) date and time, without a time zone, to the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Civil {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl Civil {
    pub fn new(year: i32, month: u32, day: u32, hour: u32, minute: u32, second: u32) -> Civil {
        Civil { year, month, day, hour, minute, second }
    }

    /// Seconds since 2000-01-01 00:00:00, PostgreSQL's epoch.
    pub fn to_seconds(self) -> i64 {
        let days = days_from_civil(self.year, self.month, self.day) - days_from_civil(2000, 1, 1);
        days * 86_400 + i64::from(self.hour * 3600 + self.minute * 60 + self.second)
    }

    pub fn from_seconds(seconds: i64) -> Civil {
        let days = seconds.div_euclid(86_400);
        let rest = seconds.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days + days_from_civil(2000, 1, 1));
        Civil::new(year, month, day, rest / 3600, rest / 60 % 60, rest % 60)
    }

    fn plus_seconds(self, seconds: i64) -> Civil {
        Civil::from_seconds(self.to_seconds() + seconds)
    }

    fn plus_days(self, days: i64) -> Civil {
        self.plus_seconds(days * 86_400)
    }

    /// The first day of the month `months` later (self is a first of the month).
    fn plus_months(self, months: u32) -> Civil {
        let index = self.year * 12 + self.month as i32 - 1 + months as i32;
        Civil::new(index.div_euclid(12), index.rem_euclid(12) as u32 + 1, 1, 0, 0, 0)
    }

    /// 0 for Sunday to 6 for Saturday.
    fn weekday(self) -> u32 {
        // 2000-01-01 was a Saturday.
        ((days_from_civil(self.year, self.month, self.day) - days_from_civil(2000, 1, 1) + 6).rem_euclid(7)) as u32
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i32, month: u32, day: u32) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i32, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(cron: &str, after: Civil) -> Civil {
        Cron::parse(cron).unwrap().next_after(after).unwrap()
    }

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Civil {
        Civil::new(y, mo, d, h, mi, s)
    }

    #[test]
    fn the_calendar_round_trips_and_knows_its_weekdays() {
        for seconds in [-10_000_000_000i64, -1, 0, 1, 86_399, 86_400, 951_782_400, 4_000_000_000] {
            assert_eq!(Civil::from_seconds(seconds).to_seconds(), seconds);
        }
        assert_eq!(at(2024, 2, 29, 0, 0, 0).plus_days(1), at(2024, 3, 1, 0, 0, 0));
        assert_eq!(at(2026, 12, 2, 0, 0, 0).weekday(), 3, "2026-12-02 is a Wednesday");
        assert_eq!(at(2000, 1, 1, 0, 0, 0).weekday(), 6);
    }

    #[test]
    fn next_runs_of_common_expressions() {
        let t = at(2026, 12, 2, 10, 17, 30);
        assert_eq!(next("* * * * *", t), at(2026, 12, 2, 10, 18, 0));
        assert_eq!(next("*/10 * * * * *", t), at(2026, 12, 2, 10, 17, 40));
        assert_eq!(next("*/15 * * * *", t), at(2026, 12, 2, 10, 30, 0));
        assert_eq!(next("0 9 * * mon-fri", t), at(2026, 12, 3, 9, 0, 0));
        assert_eq!(next("0 9 * * 6,7", t), at(2026, 12, 5, 9, 0, 0), "7 is Sunday, 6 Saturday");
        assert_eq!(next("0 0 1 jan *", t), at(2027, 1, 1, 0, 0, 0));
        assert_eq!(next("@hourly", t), at(2026, 12, 2, 11, 0, 0));
        assert_eq!(next("0 0 29 2 *", t), at(2028, 2, 29, 0, 0, 0), "the next leap day");
        assert_eq!(next("5/20 * * * *", t), at(2026, 12, 2, 10, 25, 0));
        assert_eq!(next("30 10 * * *", at(2026, 12, 2, 10, 30, 0)), at(2026, 12, 3, 10, 30, 0), "strictly after");
    }

    #[test]
    fn day_of_month_and_day_of_week_restricted_together_match_either() {
        // The 13th, or any Friday: 2026-12-04 is a Friday, before the 13th.
        assert_eq!(next("0 0 13 * fri", at(2026, 12, 2, 0, 0, 0)), at(2026, 12, 4, 0, 0, 0));
        // Restricted day of month alone.
        assert_eq!(next("0 0 13 * *", at(2026, 12, 2, 0, 0, 0)), at(2026, 12, 13, 0, 0, 0));
    }

    #[test]
    fn bad_expressions_are_refused_with_the_reason() {
        let refused = |cron: &str| Cron::parse(cron).unwrap_err().0;
        assert_eq!(refused("* * * *"), "must have 5 fields, or 6 with seconds first; it has 4");
        assert_eq!(refused("60 * * * *"), "has 60 in the minute field, outside 0 to 59");
        assert_eq!(refused("* * * * * * *"), "must have 5 fields, or 6 with seconds first; it has 7");
        assert_eq!(refused("*/0 * * * *"), "has a bad step \"*/0\" in the minute field");
        assert_eq!(refused("5-1 * * * *"), "has a range \"5-1\" that runs backwards in the minute field");
        assert_eq!(refused("0 0 30 2 *"), "never matches a day of the calendar");
        assert_eq!(refused("@sometimes"), "has an unknown shorthand \"@sometimes\"");
        assert_eq!(refused("x * * * *"), "has \"x\" in the minute field, which is not a value");
    }
}
