//! The machine's CPU, named the way speed figures need it: a worker logs it when it starts, and `nqueens
//! bench` prints it beside its rows (kernel speed depends on the CPU model, not only on its features).

/// The CPU of this machine in one line: on Linux its model name with family and model (x86-64) or
/// implementer and part (aarch64), from `/proc/cpuinfo`; elsewhere, or where that says nothing, the
/// architecture alone.
pub fn model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| describe(&text))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The description of the first processor in a `/proc/cpuinfo` text; `None` when it names none of the
/// fields looked for. Any text is accepted: fields are trimmed and cut to a sane length.
pub fn describe(cpuinfo: &str) -> Option<String> {
    // The first processor's block ends at the first blank line.
    let block = cpuinfo.split("\n\n").next().unwrap_or_default();
    let field = |name: &str| {
        block.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().chars().take(80).collect::<String>())
        })
    };
    let arch = std::env::consts::ARCH;
    let named = match (field("model name"), field("cpu family"), field("model")) {
        (Some(name), Some(family), Some(model)) => {
            format!("{name} (family {family}, model {model})")
        }
        (Some(name), _, _) => name,
        _ => match (field("CPU implementer"), field("CPU part")) {
            (Some(implementer), Some(part)) => {
                format!("{arch} (implementer {implementer}, part {part})")
            }
            _ => return None,
        },
    };
    Some(named)
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn names_x86_and_aarch64_processors_and_nothing_else() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
                   model name\t: AMD EPYC\nstepping\t: 1\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            describe(x86).as_deref(),
            Some("AMD EPYC (family 25, model 17)")
        );
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";
        let named = describe(arm).unwrap();
        assert!(named.ends_with("(implementer 0x41, part 0xd0c)"), "{named}");
        assert_eq!(describe(""), None);
        assert_eq!(describe("no fields here\n::::\n"), None);
        let long = format!("model name: {}\n", "x".repeat(10_000));
        assert_eq!(describe(&long).unwrap().len(), 80);
    }
}
