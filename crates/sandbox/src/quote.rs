//! `shell_quote`: the injection boundary for every argument that reaches a shell.

/// Quotes `arg` for a POSIX shell so that it is read back as exactly one word with exactly these
/// bytes. Plain words made only of `[A-Za-z0-9_./:=@%+,-]` are returned as they are (an empty
/// string becomes `''`); everything else is wrapped in single quotes, with each `'` written as
/// `'\''`.
#[must_use]
pub fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:=@%+,-".contains(&b));
    // A leading `=`/`~` is harmless for argv but `~` is not in the plain set anyway.
    if plain {
        return arg.to_owned();
    }
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('\'');
    for ch in arg.chars() {
        if ch == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(ch);
        }
    }
    out.push('\'');
    out
}

/// Quotes every word and joins them with spaces.
#[must_use]
pub fn shell_join<I, S>(words: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    words
        .into_iter()
        .map(|w| shell_quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_plain() {
        assert_eq!(shell_quote("git"), "git");
        assert_eq!(
            shell_quote("refs/heads/main:refs/heads/x"),
            "refs/heads/main:refs/heads/x"
        );
    }

    #[test]
    fn hostile_words_are_single_quoted() {
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("$(id)"), "'$(id)'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("`x`;rm -rf /"), "'`x`;rm -rf /'");
        assert_eq!(shell_quote("a\nb"), "'a\nb'");
        assert_eq!(
            shell_join(["echo", "a'b", "$HOME"]),
            "echo 'a'\\''b' '$HOME'"
        );
    }
}
