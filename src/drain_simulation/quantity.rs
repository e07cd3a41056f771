//! Kubernetes resource quantities (`resource.Quantity`: `500m`, `1.5`, `2Gi`, `1e3`, `128M`) as whole millicores
//! and bytes, rounded up as the scheduler's `MilliValue()` and `Value()` round.

/// A quantity as a number of its base unit (`Some(0.5)` for `500m`); `None` when it is not a quantity.
fn parse(text: &str) -> Option<f64> {
    let text = text.trim();
    let suffixes: [(&str, f64); 13] = [
        ("Ki", 1024f64),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    let more: [(&str, f64); 2] = [("P", 1e15), ("E", 1e18)];
    let (number, factor) = suffixes
        .iter()
        .chain(more.iter())
        .find_map(|(suffix, factor)| text.strip_suffix(suffix).map(|n| (n, *factor)))
        .unwrap_or((text, 1.0));
    // A decimal exponent (`1e3`, `12E-1`) is the quantity's other form; `E` alone is exa (above).
    let starts_like_a_number = number.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '.' | '+' | '-'));
    if !starts_like_a_number
        || number.chars().any(|c| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-' | 'e' | 'E')))
    {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some(value * factor)
}

/// CPU in millicores (`250m` is 250, `2` is 2000), rounded up.
pub(crate) fn millicores(text: &str) -> Option<i64> {
    parse(text).map(|cores| (cores * 1000.0 - 1e-6).ceil().max(0.0) as i64)
}

/// Memory (or any count) in whole units (`1Gi` is 1073741824), rounded up.
pub(crate) fn units(text: &str) -> Option<i64> {
    parse(text).map(|value| (value - 1e-6).ceil().max(0.0) as i64)
}

/// Millicores for people: `250m`, `2`, `1500m`.
pub(crate) fn show_millicores(millis: i64) -> String {
    if millis % 1000 == 0 { format!("{}", millis / 1000) } else { format!("{millis}m") }
}

/// Bytes for people, in the largest binary unit that divides them (`256Mi`), else MiB rounded (`~1.5Gi`).
pub(crate) fn show_bytes(bytes: i64) -> String {
    const UNITS: [(&str, i64); 4] = [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    if bytes == 0 {
        return "0".into();
    }
    for (name, size) in UNITS {
        if bytes % size == 0 {
            return format!("{}{name}", bytes / size);
        }
    }
    if bytes >= 1 << 20 { format!("{:.1}Mi", bytes as f64 / (1 << 20) as f64) } else { format!("{bytes}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_as_the_scheduler_reads_them() {
        assert_eq!(millicores("500m"), Some(500));
        assert_eq!(millicores("2"), Some(2000));
        assert_eq!(millicores("0.1"), Some(100));
        assert_eq!(millicores("1.5"), Some(1500));
        assert_eq!(millicores("100u"), Some(1), "rounded up, as MilliValue() rounds");
        assert_eq!(units("128Mi"), Some(128 << 20));
        assert_eq!(units("1G"), Some(1_000_000_000));
        assert_eq!(units("1e3"), Some(1000));
        assert_eq!(units("1Ei"), Some(1 << 60));
        assert_eq!(units("110"), Some(110));
        assert_eq!(units("1.5Ki"), Some(1536));
        for bad in ["", "abc", "12Q", "-1", "Mi", "1.2.3"] {
            assert_eq!(units(bad), None, "{bad}");
        }
    }

    #[test]
    fn amounts_are_shown_in_the_units_people_write() {
        assert_eq!(show_millicores(250), "250m");
        assert_eq!(show_millicores(3000), "3");
        assert_eq!(show_bytes(256 << 20), "256Mi");
        assert_eq!(show_bytes(4 << 30), "4Gi");
        assert_eq!(show_bytes(1_000_000_000), "953.7Mi");
    }
}
