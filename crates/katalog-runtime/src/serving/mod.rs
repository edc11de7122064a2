//! What is served and keeping it current: the server's settings
//! ([`config`]), reading a Katalog from disk ([`files`]), the served
//! Katalog, certificate and counters ([`state`]), the label values the
//! served Katalog allows ([`labels`]), watching the files to reload
//! ([`reload`]), and the logs ([`log`]).

pub mod config;
pub mod files;
pub mod labels;
pub mod log;
pub mod reload;
pub mod state;
