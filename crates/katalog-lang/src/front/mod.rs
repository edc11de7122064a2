//! The front end: from text to a located Katalog document.
//!
//! - [`source`]: a source file and the located tree of YAML nodes read from
//!   it ([`source::Loc`], [`source::DocPath`]);
//! - [`yaml`]: the YAML reader (one pass, with the limits that guard it);
//! - [`document`]: the Katalog document, typed (resources, rules);
//! - [`load`]: sources → [`load::Loaded`], every error located.
//!
//! May import `common` and `error`; never `conversion`, `admission`, `ir`
//! or `cel`.

pub mod document;
pub mod load;
pub mod source;
pub mod yaml;
