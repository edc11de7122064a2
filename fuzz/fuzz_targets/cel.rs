#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| katalog_fuzz::cel(data));
