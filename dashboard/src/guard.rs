//! Who may use the pages: the HTTP Basic password; the host a request names (a page of another
//! site reached through a DNS name of its own is refused); the origin of every action, as the
//! browser states it; and the CSRF token of every action, which this server signed (a double
//! submit: the form carries the value of a cookie that another site can neither read nor forge; it
//! can set one, from another port of the same host, but not sign it). And the headers every answer
//! carries. Pure functions of the request's headers, tested without a server.

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The cookie that carries the CSRF token.
pub const CSRF_COOKIE: &str = "jq_csrf";
/// The cookie that carries the message of the last action to the page the browser lands on.
pub const FLASH_COOKIE: &str = "jq_flash";
/// Where the pages are served over HTTPS (by a proxy in front), the cookies' names carry this
/// prefix, which a browser accepts only from a secure origin, for the whole host, and from no
/// other host or subdomain.
pub const HTTPS_PREFIX: &str = "__Host-";

/// The headers of every answer: no script, style or image from anywhere but the dashboard, no
/// form sent elsewhere, no framing by any page, no guessing of content types, and no address of a
/// page sent to another site.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
];

/// The key the tokens are signed with: drawn at start, never written anywhere, so a token is good
/// for this process only (a restart asks the browser to reload the page).
pub struct Secret([u8; 32]);

impl Secret {
    pub fn new() -> Secret {
        Secret(random())
    }

    fn sign(&self, nonce: &str) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(nonce.as_bytes());
        hex(&mac.finalize().into_bytes())
    }
}

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

/// Whether a POST may act: the form's token is present, is one this server signed, and equals the
/// cookie's.
pub fn csrf_ok(secret: &Secret, cookie_token: Option<&str>, form_token: Option<&str>) -> bool {
    match (cookie_token, form_token) {
        (Some(cookie), Some(form)) => valid_token(secret, cookie) && same(cookie.as_bytes(), form.as_bytes()),
        _ => false,
    }
}

/// A token as `new_token` makes them: 32 hexadecimal digits of a random nonce, then the 64 of its
/// signature with this server's secret.
pub fn valid_token(secret: &Secret, token: &str) -> bool {
    if token.len() != 96 || !token.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return false;
    }
    let (nonce, signature) = token.split_at(32);
    same(secret.sign(nonce).as_bytes(), signature.to_ascii_lowercase().as_bytes())
}

/// A fresh token: 16 bytes from the kernel's random source, and their signature, in hexadecimal.
pub fn new_token(secret: &Secret) -> String {
    let nonce = hex(&random::<16>());
    let signature = secret.sign(&nonce);
    format!("{nonce}{signature}")
}

fn random<const N: usize>() -> [u8; N] {
    use std::io::Read;
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .expect("read /dev/urandom");
    bytes
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A cookie's name as sent: with the `__Host-` prefix over HTTPS.
pub fn cookie_name(name: &str, https: bool) -> String {
    if https {
        format!("{HTTPS_PREFIX}{name}")
    } else {
        name.to_owned()
    }
}

/// The attributes of every cookie: never sent with a request from another site, never read by a
/// script, for the whole host; and over HTTPS, only over HTTPS.
fn cookie_attributes(https: bool) -> &'static str {
    if https {
        "Path=/; HttpOnly; SameSite=Strict; Secure"
    } else {
        "Path=/; HttpOnly; SameSite=Strict"
    }
}

/// The Set-Cookie value of a token.
pub fn csrf_set_cookie(token: &str, https: bool) -> String {
    format!("{}={token}; {}", cookie_name(CSRF_COOKIE, https), cookie_attributes(https))
}

/// Whether the `Host` a request names is one this dashboard answers to: an address literal or
/// `localhost`, with the port it listens on, or a name given with `--allowed-host` (with or without
/// its port). A page of another site that resolves its own name to this machine (DNS rebinding)
/// names its own host, and is refused.
pub fn host_ok(host: Option<&str>, port: u16, allowed: &[String]) -> bool {
    let Some(host) = host.map(str::trim).filter(|host| !host.is_empty()) else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    if allowed.iter().any(|name| {
        let name = name.to_ascii_lowercase();
        host == name || host == format!("{name}:{port}")
    }) {
        return true;
    }
    let Some((name, host_port)) = host.rsplit_once(':') else {
        return false;
    };
    if host_port != port.to_string() {
        return false;
    }
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name == "localhost" || name.parse::<std::net::IpAddr>().is_ok()
}

/// Whether an action comes from one of the dashboard's own pages, as the browser states it: its
/// `Origin` (when sent) is this request's scheme and host, and its `Sec-Fetch-Site` (when sent) is
/// `same-origin`. A page on another port of the same host is same-site, not same-origin, and is
/// refused. A client that is no browser sends neither; the token still guards it.
pub fn origin_ok(origin: Option<&str>, fetch_site: Option<&str>, host: Option<&str>, https: bool) -> bool {
    if let Some(site) = fetch_site {
        if !site.eq_ignore_ascii_case("same-origin") {
            return false;
        }
    }
    match origin {
        None => true,
        Some(origin) => {
            let scheme = if https { "https" } else { "http" };
            host.is_some_and(|host| origin.eq_ignore_ascii_case(&format!("{scheme}://{host}")))
        }
    }
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

    pub fn set_cookie(&self, https: bool) -> String {
        format!("{}={}; {}", cookie_name(FLASH_COOKIE, https), self.encode(), cookie_attributes(https))
    }
}

/// The Set-Cookie value that removes the flash once shown.
pub fn clear_flash_cookie(https: bool) -> String {
    format!("{}=; {}; Max-Age=0", cookie_name(FLASH_COOKIE, https), cookie_attributes(https))
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
        let secret = Secret::new();
        let token = new_token(&secret);
        assert!(valid_token(&secret, &token));
        assert_ne!(token, new_token(&secret), "fresh each time");
        assert!(csrf_ok(&secret, Some(&token), Some(&token)));
        assert!(!csrf_ok(&secret, Some(&token), None), "a forged form without the field");
        assert!(!csrf_ok(&secret, None, Some(&token)), "no cookie");
        assert!(!csrf_ok(&secret, Some(&token), Some(&new_token(&secret))), "another token");
        assert!(!csrf_ok(&secret, Some(""), Some("")), "empty tokens are not tokens");
        assert!(!csrf_ok(&secret, Some("abc"), Some("abc")), "nor made-up ones");
    }

    #[test]
    fn a_token_this_server_did_not_sign_is_refused() {
        let secret = Secret::new();
        // What another page can set as the cookie and post as the field: the right shape, unsigned.
        let forged = "0".repeat(96);
        assert!(!valid_token(&secret, &forged));
        assert!(!csrf_ok(&secret, Some(&forged), Some(&forged)));
        // Signed by another process of the dashboard: not this one's.
        let other = new_token(&Secret::new());
        assert!(!csrf_ok(&secret, Some(&other), Some(&other)));
        // A token of 0.4.0's shape, 64 hexadecimal digits, is no longer one.
        let old = "a".repeat(64);
        assert!(!csrf_ok(&secret, Some(&old), Some(&old)));
        // One digit of the signature changed.
        let token = new_token(&secret);
        let last = if token.ends_with('0') { '1' } else { '0' };
        let edited = format!("{}{last}", &token[..95]);
        assert!(!csrf_ok(&secret, Some(&edited), Some(&edited)));
    }

    #[test]
    fn set_cookie_attributes() {
        let header = csrf_set_cookie("t", false);
        assert!(header.contains("HttpOnly") && header.contains("SameSite=Strict") && header.starts_with("jq_csrf=t;"));
        let header = csrf_set_cookie("t", true);
        assert!(header.starts_with("__Host-jq_csrf=t;") && header.contains("; Secure") && header.contains("Path=/"));
        assert!(!header.contains("Domain"), "a __Host- cookie names no domain");
        assert!(Flash::ok("x").set_cookie(true).starts_with("__Host-jq_flash="));
        assert!(clear_flash_cookie(true).starts_with("__Host-jq_flash=;"));
    }

    #[test]
    fn hosts_this_dashboard_answers_to() {
        let allowed = vec!["jobs.example.com".to_owned()];
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "10.1.2.3:8080",
            "jobs.example.com",
            "jobs.example.com:8080",
            "JOBS.example.com",
        ] {
            assert!(host_ok(Some(host), 8080, &allowed), "{host}");
        }
        for host in ["evil.example:8080", "127.0.0.1:9999", "localhost", "127.0.0.1", "", "jobs.example.com:9"] {
            assert!(!host_ok(Some(host), 8080, &allowed), "{host}");
        }
        assert!(!host_ok(None, 8080, &allowed));
    }

    #[test]
    fn actions_come_from_the_dashboards_own_origin() {
        let host = Some("127.0.0.1:8080");
        assert!(origin_ok(Some("http://127.0.0.1:8080"), Some("same-origin"), host, false));
        assert!(origin_ok(None, None, host, false), "a client that is no browser");
        assert!(!origin_ok(Some("http://127.0.0.1:9999"), None, host, false), "another port");
        assert!(!origin_ok(None, Some("same-site"), host, false), "another port, as Sec-Fetch-Site says");
        assert!(!origin_ok(None, Some("cross-site"), host, false));
        assert!(!origin_ok(Some("null"), None, host, false), "a sandboxed or file page");
        assert!(!origin_ok(Some("http://127.0.0.1:8080"), None, host, true), "http where https is served");
        assert!(origin_ok(Some("https://127.0.0.1:8080"), None, host, true));
        assert!(!origin_ok(Some("http://127.0.0.1:8080"), None, None, false), "no host to compare with");
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
