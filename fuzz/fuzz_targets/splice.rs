#![no_main]

// Differential: generated objects converted on the fast path and the tree path.
libfuzzer_sys::fuzz_target!(|data: &[u8]| katalog_fuzz::splice(data));
