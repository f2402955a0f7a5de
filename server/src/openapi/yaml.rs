//! The description as YAML that every YAML reader loads to the JSON document's value.
//!
//! A general YAML serializer writes `on`, `yes`, `off`, `2026-01-29` and `1:30` as plain
//! scalars: strings to a YAML 1.2 reader, but booleans, dates and sexagesimal numbers to a
//! YAML 1.1 reader (PyYAML and the many generators built on it). Here every string is written
//! so that no reader can take it for anything else: double-quoted (JSON escapes are YAML
//! escapes), or as a literal block when it spans lines; keys stay plain only when they are
//! identifiers no YAML version resolves to another type.

use std::fmt::Write;

use serde_json::Value;

/// Renders `doc` as a block-style YAML document.
pub fn to_yaml(doc: &Value) -> String {
    let mut out = String::new();
    match doc {
        Value::Object(m) if !m.is_empty() => mapping(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0),
        scalar => {
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn mapping(out: &mut String, m: &serde_json::Map<String, Value>, indent: usize) {
    for (k, v) in m {
        pad(out, indent);
        out.push_str(&key(k));
        out.push(':');
        value(out, v, indent);
    }
}

fn sequence(out: &mut String, a: &[Value], indent: usize) {
    for v in a {
        pad(out, indent);
        out.push('-');
        value(out, v, indent);
    }
}

/// Writes what follows `key:` or `-` (which `out` ends with), then the line end.
fn value(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            mapping(out, m, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            sequence(out, a, indent + 2);
        }
        Value::String(s) if literal_block_fits(s) => {
            // `|` keeps one final newline, `|-` none, `|+` all of them.
            let body = s.trim_end_matches('\n');
            let chomp = match s.len() - body.len() {
                0 => "-",
                1 => "",
                _ => "+",
            };
            let _ = writeln!(out, " |{chomp}");
            for line in s.split_inclusive('\n') {
                let text = line.trim_end_matches('\n');
                if !text.is_empty() {
                    pad(out, indent + 2);
                    out.push_str(text);
                }
                out.push('\n');
            }
        }
        scalar => {
            out.push(' ');
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
}

/// A multi-line string a literal block reproduces exactly: printable text, the first line
/// not starting with a space (it would set the indentation), no trailing spaces (kept, but
/// invisible and fragile in review), no tabs or carriage returns.
fn literal_block_fits(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with(' ')
        && !s.starts_with('\n')
        && s.chars()
            .all(|c| c == '\n' || (!c.is_control() && c != '\u{feff}'))
        && s.lines().all(|l| !l.ends_with(' '))
}

/// A scalar, or an empty collection, on one line.
fn inline(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quoted(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// A YAML 1.1 float needs a `.` in its mantissa and a sign in its exponent (`1.0e+20`, not
/// JSON's `1e20`, which YAML 1.1 reads as a string).
fn number(n: &serde_json::Number) -> String {
    let s = n.to_string();
    if !n.is_f64() {
        return s;
    }
    let (mantissa, exponent) = match s.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (s.as_str(), None),
    };
    let mut out = mantissa.to_owned();
    if !out.contains('.') {
        out.push_str(".0");
    }
    if let Some(e) = exponent {
        out.push('e');
        if !e.starts_with(['+', '-']) {
            out.push('+');
        }
        out.push_str(e);
    }
    out
}

/// Double-quoted: JSON's string escapes are all YAML double-quoted escapes.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// Plain when it is an identifier no YAML version reads as anything but a string.
fn key(k: &str) -> String {
    let identifier = k
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    const RESOLVED: [&str; 11] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf",
    ];
    if identifier && !RESOLVED.contains(&k.to_ascii_lowercase().as_str()) {
        k.to_owned()
    } else {
        quoted(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_a_yaml_1_1_reader_would_resolve_are_quoted() {
        let doc = json!({"enum": ["on", "yes", "off", "2026-01-29", "1:30", "0012", "~"],
                          "on": "y", "200": {"x": 1}, "/v1/news": true});
        let y = to_yaml(&doc);
        for plain in [
            "- on", "- yes", "- off", "- 2026", "- 1:30", "- 0012", "- ~", "\non:", "\n200:",
        ] {
            assert!(!y.contains(plain), "{plain:?} left plain in:\n{y}");
        }
        assert!(y.contains("\"on\": \"y\""), "{y}");
        assert!(y.contains("\"200\":\n  x: 1"), "{y}");
    }

    #[test]
    fn the_yaml_reads_back_as_the_json_value() {
        let doc = json!({
            "a": "line one\nline two",
            "b": "ends with a newline\n",
            "c": "two newlines\n\n",
            "d": "  leading spaces\nthen more",
            "e": "tab\there",
            "f": "blank\n\nline inside",
            "g": [],
            "h": {},
            "i": [1, 2.5, -3, null, false, {"k": "v"}, ["x"]],
            "j": "quote \" and backslash \\ and unicode é ✓",
            "k": "trailing space \nnext",
            "l": "",
            "m": 1e20,
            "half": 0.5,
        });
        let y = to_yaml(&doc);
        let back: Value = serde_norway::from_str(&y).unwrap();
        assert_eq!(back, doc, "{y}");
        assert!(y.contains("m: 1.0e+20") && y.contains("half: 0.5"), "{y}");
    }
}
