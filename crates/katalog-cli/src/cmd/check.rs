//! `katalog check`: load and compile Katalogs, report every error and warning.

use katalog_runtime::serving::files;

use crate::args::*;
use crate::cmd::*;
use crate::exit::{self, Exit, KATALOG, NO};
use crate::output::plural;

pub(crate) fn run(args: CheckArgs) -> Result<(), Exit> {
    let CheckArgs {
        mut katalogs,
        katalog,
        strict,
        live,
        ceiling,
    } = args;
    katalogs.extend(katalog);
    let live = live.fetch()?;
    let ceiling = ceiling.build()?;
    let mut worst = exit::SUCCESS;
    for path in &katalogs {
        match load_ir_live(path, live.as_ref()) {
            Ok(ir) => {
                let sources = files::read_katalog(path)?;
                let over = katalog_lang::ceiling::check(
                    &ir,
                    &sources,
                    ceiling.as_ref().unwrap_or(&Default::default()),
                    None,
                );
                if ceiling.is_some() && !over.is_empty() {
                    err!("{}", katalog_lang::Diagnostics(over).render());
                    worst = worst.max(NO);
                    continue;
                }
                let mut warnings = ir.admission.warnings.clone();
                // Lock-out-prone: what `serve --ceiling` would refuse.
                warnings.extend(over.into_iter().map(|mut d| {
                    d.message = format!("lock-out-prone: {}", d.message);
                    d.warning()
                }));
                let warnings = &warnings;
                for w in warnings {
                    errln!("{}", w.render());
                }
                if strict && !warnings.is_empty() {
                    errln!(
                        "{}: {} warning{} (--strict makes them errors)",
                        path.display(),
                        warnings.len(),
                        plural(warnings.len())
                    );
                    worst = worst.max(NO);
                    continue;
                }
                let rules: usize = ir
                    .resources
                    .iter()
                    .flat_map(|r| &r.versions)
                    .map(|v| v.rules.len())
                    .sum();
                let (v, m) = (ir.admission.validations.len(), ir.admission.mutations.len());
                outln!(
                    "{}: ok ({} resource{}, {} conversion rule{}, {} validation{}, {} mutation{}{})",
                    path.display(),
                    ir.resources.len(),
                    plural(ir.resources.len()),
                    rules,
                    plural(rules),
                    v,
                    plural(v),
                    m,
                    plural(m),
                    if warnings.is_empty() {
                        String::new()
                    } else {
                        format!(", {} warning{}", warnings.len(), plural(warnings.len()))
                    }
                );
            }
            Err(Exit(message, code)) => {
                err!("{message}");
                // For `check`, a Katalog that does not compile is the answer.
                worst = worst.max(if code == KATALOG { NO } else { code });
            }
        }
    }
    match worst {
        exit::SUCCESS => Ok(()),
        code => Err(Exit::quiet(code)),
    }
}
