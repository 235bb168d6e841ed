//! Fuzz target: any bytes as a probe definition, on every architecture. The checker
//! must never panic; an accepted probe's readback line must be accepted again and
//! read back identically (when its name is one a user could write), and its format
//! file must render.
#![no_main]

use ktrace_probe::{Arch, Definition, Offline, Target, check_line, render};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    for &arch in Arch::ALL {
        let c = check_line(line, Target::new(arch), &Offline);
        if let Ok(Definition::Probe(p)) = &c.definition {
            let _ = render::format_file(p, arch);
            let _ = render::canonical(&Definition::Probe(p.clone()), arch);
            // The kernel does not validate the names it generates: a probe point
            // that is no C identifier (impossible for a real symbol, possible for a
            // file name) reads back under a name that cannot be written again.
            if p.auto_event && !ktrace_probe::fetch::good_name(&p.event) {
                continue;
            }
            let back = render::readback(p, arch);
            let again = check_line(&back, Target::new(arch), &Offline);
            match &again.definition {
                Ok(Definition::Probe(p2)) => assert_eq!(render::readback(p2, arch), back),
                other => panic!("readback {back:?} of {line:?} not accepted: {other:?}"),
            }
        }
    }
});
