//! Who may use the pages: the HTTP Basic password, and the CSRF check of every action (a
//! double-submit cookie: the form carries the value of a cookie that another site can neither
//! read nor set). Pure functions of the request's headers, tested without a server.

use base64::Engine;

/// The cookie that carries the CSRF token.
pub const CSRF_COOKIE: &str = "jq_csrf";
/// The cookie that carries the message of the last action to the page the browser lands on.
pub const FLASH_COOKIE: &str = "jq_flash";

/// Whether an `Authorization` header carries the password, with any user name.
pub fn basic_auth_ok(header: Option<&str>, password: &str) -> bool {
    let Some(encoded) = header.and_then(|value| value.strip_prefix("Basic ")) else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
        return false;
    };
    let Some(colon) = decoded.iter().position(|&byte| byte == b':') else {
        return false;
    };
    same(&decoded[colon + 1..], password.as_bytes())
}

/// Compares in time that depends only on the lengths, so that the time of a refusal tells nothing
/// of how much of a guess was right.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

/// Whether a POST may act: the form's token is present, looks like one of ours, and equals the
/// cookie's.
pub fn csrf_ok(cookie_token: Option<&str>, form_token: Option<&str>) -> bool {
    match (cookie_token, form_token) {
        (Some(cookie), Some(form)) => valid_token(cookie) && same(cookie.as_bytes(), form.as_bytes()),
        _ => false,
    }
}

/// A token as `new_token` makes them: 64 hexadecimal digits.
pub fn valid_token(token: &str) -> bool {
    token.len() == 64 && token.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// A fresh token: 32 bytes from the kernel's random source, in hexadecimal.
pub fn new_token() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .expect("read /dev/urandom");
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The Set-Cookie value of a token: never sent with a request from another site, never read by a
/// script.
pub fn csrf_set_cookie(token: &str) -> String {
    format!("{CSRF_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict")
}

/// The outcome of an action, shown once on the next page.
#[derive(Debug, Clone, PartialEq)]
pub struct Flash {
    pub ok: bool,
    /// The database's SQLSTATE when it refused.
    pub sqlstate: Option<String>,
    pub message: String,
}

impl Flash {
    pub fn ok(message: impl Into<String>) -> Flash {
        Flash { ok: true, sqlstate: None, message: message.into() }
    }

    pub fn error(sqlstate: Option<String>, message: impl Into<String>) -> Flash {
        Flash { ok: false, sqlstate, message: message.into() }
    }

    /// As a cookie value: `ok` or `error`, the SQLSTATE (or nothing) and the message, separated
    /// by `|` and percent-encoded, so any message fits a cookie.
    pub fn encode(&self) -> String {
        let text = format!(
            "{}|{}|{}",
            if self.ok { "ok" } else { "error" },
            self.sqlstate.as_deref().unwrap_or(""),
            self.message
        );
        percent_encoding::utf8_percent_encode(&text, percent_encoding::NON_ALPHANUMERIC).to_string()
    }

    pub fn decode(value: &str) -> Option<Flash> {
        let text = percent_encoding::percent_decode_str(value).decode_utf8().ok()?;
        let mut parts = text.splitn(3, '|');
        let ok = match parts.next()? {
            "ok" => true,
            "error" => false,
            _ => return None,
        };
        let sqlstate = Some(parts.next()?).filter(|code| !code.is_empty()).map(str::to_owned);
        Some(Flash { ok, sqlstate, message: parts.next()?.to_owned() })
    }

    pub fn set_cookie(&self) -> String {
        format!("{FLASH_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict", self.encode())
    }
}

/// The Set-Cookie value that removes the flash once shown.
pub fn clear_flash_cookie() -> String {
    format!("{FLASH_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(text: &str) -> String {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(text))
    }

    #[test]
    fn basic_auth_takes_any_user_and_only_the_password() {
        assert!(basic_auth_ok(Some(&basic("anyone:pw")), "pw"));
        assert!(basic_auth_ok(Some(&basic(":pw")), "pw"));
        assert!(basic_auth_ok(Some(&basic("a:b:pw")), "b:pw"), "the password may hold a colon");
        assert!(!basic_auth_ok(Some(&basic("anyone:pw2")), "pw"));
        assert!(!basic_auth_ok(Some(&basic("anyone:p")), "pw"));
        assert!(!basic_auth_ok(Some(&basic("nocolon")), "pw"));
        assert!(!basic_auth_ok(Some("Basic !!!"), "pw"));
        assert!(!basic_auth_ok(Some("Bearer x"), "pw"));
        assert!(!basic_auth_ok(None, "pw"));
    }

    #[test]
    fn cookies_by_name() {
        let header = Some("a=1; jq_csrf=abc; jq_csrfx=no");
        assert_eq!(cookie(header, "jq_csrf"), Some("abc"));
        assert_eq!(cookie(header, "a"), Some("1"));
        assert_eq!(cookie(header, "b"), None);
        assert_eq!(cookie(None, "a"), None);
    }

    #[test]
    fn csrf_needs_the_cookie_and_the_same_form_field() {
        let token = new_token();
        assert!(valid_token(&token));
        assert_ne!(token, new_token(), "fresh each time");
        assert!(csrf_ok(Some(&token), Some(&token)));
        assert!(!csrf_ok(Some(&token), None), "a forged form without the field");
        assert!(!csrf_ok(None, Some(&token)), "no cookie");
        assert!(!csrf_ok(Some(&token), Some(&new_token())), "another token");
        assert!(!csrf_ok(Some(""), Some("")), "empty tokens are not tokens");
        assert!(!csrf_ok(Some("abc"), Some("abc")), "nor made-up ones");
    }

    #[test]
    fn set_cookie_attributes() {
        let header = csrf_set_cookie("t");
        assert!(header.contains("HttpOnly") && header.contains("SameSite=Strict") && header.starts_with("jq_csrf=t;"));
    }

    #[test]
    fn flash_round_trip() {
        for flash in [
            Flash::ok("queue emails paused"),
            Flash::error(Some("42501".into()), "permission denied for queue \"a|b\"; 100% = ü"),
            Flash::error(None, ""),
        ] {
            assert_eq!(Flash::decode(&flash.encode()), Some(flash.clone()));
            assert!(flash.encode().bytes().all(|b| b.is_ascii_alphanumeric() || b == b'%'));
        }
        assert_eq!(Flash::decode("garbage"), None);
        assert_eq!(Flash::decode("%FF"), None);
    }
}
