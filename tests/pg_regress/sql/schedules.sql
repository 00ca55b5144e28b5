-- Schedules' time zones (guide, "Schedules"): a full zone name of the tz database, an area and a
-- location (or UTC), and nothing else. An abbreviation (EST, CET) is refused with 22023 naming
-- time_zone, though the tz database has zones of some of those names: PostgreSQL reads them as
-- fixed offsets, which differ with the session's timezone_abbreviations. A refused call writes
-- nothing.
\set SHOW_CONTEXT never
TRUNCATE jq_schedule_specs;

SELECT jq_schedule('s', '0 12 * * *', 'q', '{}', time_zone => 'EST');
\echo :SQLSTATE
SELECT jq_schedule('s', '0 12 * * *', 'q', '{}', time_zone => 'CET');
\echo :SQLSTATE
SELECT jq_schedule('s', '0 12 * * *', 'q', '{}', time_zone => 'EST5EDT');
\echo :SQLSTATE
SELECT jq_schedule('s', '0 12 * * *', 'q', '{}', time_zone => 'Mars/Olympus');
\echo :SQLSTATE
SELECT jq_schedule('s', '0 12 * * *', 'q', '{}', time_zone => NULL);
\echo :SQLSTATE
SELECT jq_cron_next('0 12 * * *', 'EST', '2026-12-07 00:00+00', 1);
\echo :SQLSTATE
SELECT count(*) AS schedules FROM jq_schedule_specs;

-- Full names and UTC are taken. Noon in New York in winter is 17:00 UTC.
SELECT jq_schedule('ny', '0 12 * * *', 'q', '{}', time_zone => 'America/New_York') IS NOT NULL AS scheduled;
SELECT jq_schedule('utc', '0 12 * * *', 'q', '{}', time_zone => 'UTC') IS NOT NULL AS scheduled;
SELECT jq_schedule('etc', '0 12 * * *', 'q', '{}', time_zone => 'Etc/GMT+5') IS NOT NULL AS scheduled;
SELECT name, time_zone FROM jq_schedule_specs ORDER BY name;
SELECT to_char(t AT TIME ZONE 'UTC', 'MM-DD HH24:MI') AS noon_in_new_york
FROM jq_cron_next('0 12 * * *', 'America/New_York', '2026-12-07 00:00+00', 2) AS t;

-- A session's own settings change neither: another time zone, abbreviations read as Australian
-- (where EST is ten hours ahead of UTC) and another date style.
SET timezone_abbreviations = 'Australia';
SET timezone = 'Asia/Tokyo';
SET DateStyle = 'SQL, DMY';
SELECT to_char(t AT TIME ZONE 'Etc/UTC', 'MM-DD HH24:MI') AS noon_in_new_york
FROM jq_cron_next('0 12 * * *', 'America/New_York', '2026-12-07 00:00+00', 2) AS t;
SELECT jq_schedule('s', '0 12 * * *', 'q', '{}', time_zone => 'EST');
\echo :SQLSTATE
RESET timezone_abbreviations;
RESET timezone;
RESET DateStyle;
SELECT jq_unschedule('ny'), jq_unschedule('utc'), jq_unschedule('etc');
