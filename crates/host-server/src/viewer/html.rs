//! Writing HTML: the one escaping function every value written into a page goes through, and
//! the page frame (head, header, the assets) the pages share.

use std::fmt::Write as _;

/// `text` with `&`, `<`, `>`, `"` and `'` replaced by their character references, safe in an
/// element's text and in a quoted attribute value alike.
#[must_use]
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    push_escaped(&mut out, text);
    out
}

/// Appends `text`, escaped as [`escape`] does, to `out`.
pub(crate) fn push_escaped(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
        out.push_str(&rest[..at]);
        out.push_str(match rest.as_bytes()[at] {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            _ => "&#39;",
        });
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
}

/// Percent-encodes `text` for a URL query value (everything but unreserved characters), so a
/// value cannot end its parameter or start another.
#[must_use]
pub(crate) fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// At most `max` characters of `text`, with `…` when it was cut (on a character boundary).
#[must_use]
pub(crate) fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some((at, _)) => std::borrow::Cow::Owned(format!("{}…", &text[..at])),
    }
}

/// Dollars from millionths of a dollar, to the cent (`$1.23`), or to the ten-thousandth below
/// a cent.
#[must_use]
pub(crate) fn dollars(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let micros = micros.unsigned_abs();
    if micros != 0 && micros < 10_000 {
        format!(
            "{sign}${}.{:04}",
            micros / 1_000_000,
            (micros % 1_000_000) / 100
        )
    } else {
        format!(
            "{sign}${}.{:02}",
            micros / 1_000_000,
            (micros % 1_000_000) / 10_000
        )
    }
}

/// A time in milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS` UTC.
#[must_use]
pub(crate) fn time(ms: i64) -> String {
    auto_swe_store::Timestamp::from_millis(ms).utc_datetime()
}

/// What the frame of every page needs to know.
pub(crate) struct Frame<'a> {
    /// The `<title>`.
    pub(crate) title: &'a str,
    /// The signed-in person's email, when there is one (shows the sign-out form).
    pub(crate) user: Option<&'a str>,
    /// The session's CSRF token, for the sign-out form.
    pub(crate) csrf: Option<&'a str>,
    /// `data-*` attributes of `<body>` the script reads (name, value), escaped here.
    pub(crate) data: &'a [(&'a str, &'a str)],
}

/// A whole page around `main` (already HTML).
pub(crate) fn page(frame: &Frame<'_>, main: &str) -> String {
    let mut out = String::with_capacity(main.len() + 1024);
    out.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    out.push_str("<title>");
    push_escaped(&mut out, frame.title);
    out.push_str(" · auto-swe</title>");
    let _ = write!(
        out,
        "<link rel=\"stylesheet\" href=\"/ui/assets/viewer.css?v={}\">\
         <script src=\"/ui/assets/viewer.js?v={}\" defer></script></head><body",
        super::assets::version(),
        super::assets::version()
    );
    for (name, value) in frame.data {
        let _ = write!(out, " data-{name}=\"{}\"", escape(value));
    }
    out.push_str("><header><a class=\"brand\" href=\"/ui/runs\">auto-swe</a>");
    if let Some(user) = frame.user {
        out.push_str("<span class=\"who\">");
        push_escaped(&mut out, user);
        out.push_str("</span>");
        if let Some(csrf) = frame.csrf {
            out.push_str(
                "<form class=\"logout\" method=\"post\" action=\"/ui/logout\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"",
            );
            push_escaped(&mut out, csrf);
            out.push_str("\"><button type=\"submit\">Sign out</button></form>");
        }
    }
    out.push_str("</header><main>");
    out.push_str(main);
    out.push_str("</main></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn every_markup_character_is_replaced() {
        for (raw, escaped) in [
            ("", ""),
            ("plain", "plain"),
            ("<", "&lt;"),
            (">", "&gt;"),
            ("&", "&amp;"),
            ("\"", "&quot;"),
            ("'", "&#39;"),
            ("&amp;", "&amp;amp;"),
            (
                "<img src=x onerror=\"alert('x')\">",
                "&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;",
            ),
            ("</script><script>", "&lt;/script&gt;&lt;script&gt;"),
            ("é<ü>", "é&lt;ü&gt;"),
        ] {
            assert_eq!(escape(raw), escaped, "{raw}");
        }
    }

    proptest! {
        #[test]
        fn escaped_text_holds_no_markup_and_reads_back(text in any::<String>()) {
            let out = escape(&text);
            prop_assert!(!out.contains(['<', '>', '"', '\'']));
            // Every `&` starts one of the five references.
            for (at, _) in out.match_indices('&') {
                let rest = &out[at..];
                prop_assert!(
                    ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"].iter().any(|r| rest.starts_with(r)),
                    "{rest}"
                );
            }
            let back = out
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&");
            prop_assert_eq!(back, text);
        }

        #[test]
        fn query_values_hold_no_separator(text in any::<String>()) {
            let out = query_value(&text);
            prop_assert!(!out.contains(['&', '=', '#', '?', ' ', '"', '<', '\'']));
        }
    }

    #[test]
    fn money_and_time_read_as_people_write_them() {
        assert_eq!(dollars(0), "$0.00");
        assert_eq!(dollars(1_230_000), "$1.23");
        assert_eq!(dollars(1_500), "$0.0015");
        assert_eq!(time(0), "1970-01-01 00:00:00");
        assert_eq!(time(1_709_251_199_000), "2024-02-29 23:59:59");
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("ab", 3), "ab");
    }
}
