//! The names the system takes for workers and devices: checked alike by the coordinator (its store,
//! ledger and lease policy) and by a worker before it starts. Domain rules, not wire ones: the wire
//! crate re-exports them.

/// Longest worker id or name the coordinator takes, in bytes.
pub const MAX_WORKER_ID_LEN: usize = 128;

/// Longest worker name: a worker's id adds its process id and start time (up to 28 characters) and must
/// stay within [`MAX_WORKER_ID_LEN`].
pub const MAX_WORKER_NAME_LEN: usize = MAX_WORKER_ID_LEN - 28;

/// Longest name of the device that computed a result.
pub const MAX_DEVICE_LEN: usize = 64;

/// Whether `id` may be a worker's id or name as stored: 1 to [`MAX_WORKER_ID_LEN`] bytes, no control
/// character. What every build took, so what the store and the ledger may hold; a new request is held
/// to [`valid_new_worker_id`].
pub fn valid_worker_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_WORKER_ID_LEN && !id.chars().any(char::is_control)
}

/// Whether `id` may be the worker id or name of a request: [`valid_worker_id`], and no character that
/// changes how the text around it shows (Unicode's format characters, such as a right-to-left override
/// or a zero-width joiner, and its line and paragraph separators) or that shows as nothing (Unicode's
/// default-ignorable code points, such as variation selectors and Hangul fillers), since names reach
/// logs, tables and the status page as sent. The coordinator refuses a request naming another, so a
/// worker checks its own before it starts. (Taken since 2026-11-30, the invisible ones since
/// 2026-12-01: names stored before are still read.)
pub fn valid_new_worker_id(id: &str) -> bool {
    valid_worker_id(id)
        && !id
            .chars()
            .any(|c| changes_how_text_shows(c) || shows_as_nothing(c))
}

/// Whether `c` is a Unicode format character or a line or paragraph separator.
fn changes_how_text_shows(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    matches!(
        c.general_category(),
        GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// Unicode's `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt, Unicode 16): characters a
/// text shows as nothing unless it supports them, and the code points reserved to be such. A test
/// compares it with the property's table in `regex-syntax`, character by character.
const DEFAULT_IGNORABLE: &[(char, char)] = &[
    ('\u{ad}', '\u{ad}'),
    ('\u{34f}', '\u{34f}'),
    ('\u{61c}', '\u{61c}'),
    ('\u{115f}', '\u{1160}'),
    ('\u{17b4}', '\u{17b5}'),
    ('\u{180b}', '\u{180f}'),
    ('\u{200b}', '\u{200f}'),
    ('\u{202a}', '\u{202e}'),
    ('\u{2060}', '\u{206f}'),
    ('\u{3164}', '\u{3164}'),
    ('\u{fe00}', '\u{fe0f}'),
    ('\u{feff}', '\u{feff}'),
    ('\u{ffa0}', '\u{ffa0}'),
    ('\u{fff0}', '\u{fff8}'),
    ('\u{1bca0}', '\u{1bca3}'),
    ('\u{1d173}', '\u{1d17a}'),
    ('\u{e0000}', '\u{e0fff}'),
];

/// Whether `c` is a default-ignorable code point ([`DEFAULT_IGNORABLE`]).
fn shows_as_nothing(c: char) -> bool {
    DEFAULT_IGNORABLE
        .iter()
        .any(|&(first, last)| (first..=last).contains(&c))
}

/// The longest GPU kernel shape a worker may name (`coop/1024/256/32` is 16).
pub const MAX_GPU_KERNEL_LEN: usize = 32;

/// Whether `shape` may name the kernel a GPU runs in the worker table: 1 to [`MAX_GPU_KERNEL_LEN`]
/// characters of `a-z`, `0-9` and `/`.
pub fn valid_gpu_kernel(shape: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '/';
    !shape.is_empty() && shape.len() <= MAX_GPU_KERNEL_LEN && shape.chars().all(allowed)
}

/// Most distinct kernel shapes a worker's GPUs may say they run (the coordinator refuses more, and
/// keeps each once).
pub const MAX_GPU_SHAPES: usize = 8;

/// Each shape of `kernels` once, in the order they first come, the first `most` of them.
pub fn distinct_gpu_kernels(kernels: &[String], most: usize) -> Vec<&str> {
    let mut shapes: Vec<&str> = Vec::new();
    for k in kernels {
        if shapes.len() == most {
            break;
        }
        if !shapes.contains(&k.as_str()) {
            shapes.push(k);
        }
    }
    shapes
}

/// Whether `device` may name the device of a result: 1 to [`MAX_DEVICE_LEN`] letters, digits or `:._-`
/// (the coordinator refuses a report with any other, so a worker sends only names that pass).
pub fn valid_device(device: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || ":._-".contains(c);
    !device.is_empty() && device.len() <= MAX_DEVICE_LEN && device.chars().all(allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_kernel_shapes_are_taken_within_their_rule_only() {
        assert!(valid_gpu_kernel("flat/128/4"));
        assert!(valid_gpu_kernel("coop/1024/256/32"));
        assert!(valid_gpu_kernel(&"a".repeat(MAX_GPU_KERNEL_LEN)));
        for bad in [
            String::new(),
            "a".repeat(MAX_GPU_KERNEL_LEN + 1),
            "Flat/128/4".into(),
            "flat 128".into(),
            "flat/128/4\n".into(),
            "flat:128".into(),
        ] {
            assert!(!valid_gpu_kernel(&bad), "{bad:?}");
        }
    }

    #[test]
    fn each_shape_is_kept_once_in_order_up_to_the_most() {
        let named: Vec<String> = ["b", "a", "b", "a", "c"].map(String::from).into();
        assert_eq!(distinct_gpu_kernels(&named, 8), ["b", "a", "c"]);
        assert_eq!(distinct_gpu_kernels(&named, 3), ["b", "a", "c"]);
        assert_eq!(distinct_gpu_kernels(&named, 2), ["b", "a"]);
        assert!(distinct_gpu_kernels(&named, 0).is_empty());
        assert!(distinct_gpu_kernels(&[], 8).is_empty());
    }

    /// Each rule at its edges.
    #[test]
    fn names_are_taken_within_their_rules_only() {
        assert!(valid_worker_id("node-1"));
        assert!(valid_worker_id(&"x".repeat(MAX_WORKER_ID_LEN)));
        assert!(!valid_worker_id(&"x".repeat(MAX_WORKER_ID_LEN + 1)));
        assert!(!valid_worker_id(""));
        assert!(!valid_worker_id("a\nb"));
        // A request's names show as they are written; stored ones keep the rule they were taken by.
        assert!(valid_new_worker_id("node-1"));
        assert!(valid_new_worker_id("Müller-PC 東京"));
        for shifty in [
            "evil\u{202e}gnp.exe",
            "a\u{200d}b",
            "a\u{2066}b",
            "a\u{feff}",
            "a\u{2028}b",
            "a\u{2029}b",
            "\u{e0041}",
            // Shown as nothing: a variation selector, Hangul fillers, a combining grapheme joiner.
            "node\u{fe0f}",
            "node\u{e0100}",
            "\u{3164}",
            "a\u{115f}b",
            "a\u{ffa0}",
            "a\u{34f}b",
        ] {
            assert!(valid_worker_id(shifty), "{shifty:?}");
            assert!(!valid_new_worker_id(shifty), "{shifty:?}");
        }
        assert!(!valid_new_worker_id(""));
        assert!(!valid_new_worker_id("a\nb"));
        assert!(!valid_new_worker_id(&"x".repeat(MAX_WORKER_ID_LEN + 1)));
        assert!(valid_device("cuda:0"));
        assert!(valid_device(&"d".repeat(MAX_DEVICE_LEN)));
        assert!(!valid_device(&"d".repeat(MAX_DEVICE_LEN + 1)));
        assert!(!valid_device(""));
        assert!(!valid_device("gpu 0"));
        assert_eq!(MAX_WORKER_NAME_LEN + 28, MAX_WORKER_ID_LEN);
    }

    /// The table of default-ignorable code points is Unicode's, every character of it and none other:
    /// compared with the property as `regex-syntax` parses it.
    #[test]
    fn the_invisible_characters_are_unicodes_default_ignorable_ones() {
        use regex_syntax::hir::{Class, HirKind};
        let hir = regex_syntax::Parser::new()
            .parse(r"\p{Default_Ignorable_Code_Point}")
            .unwrap();
        let HirKind::Class(Class::Unicode(class)) = hir.kind() else {
            panic!("{hir:?}");
        };
        let theirs: Vec<(char, char)> = class
            .ranges()
            .iter()
            .map(|r| (r.start(), r.end()))
            .collect();
        assert_eq!(DEFAULT_IGNORABLE, &theirs[..]);
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            assert_eq!(
                shows_as_nothing(c),
                theirs.iter().any(|&(a, b)| (a..=b).contains(&c)),
                "{c:?}"
            );
        }
    }
}
