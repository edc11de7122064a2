#![no_main]

// Differential: raw bytes as a ConversionReview on the fast path and the tree path.
libfuzzer_sys::fuzz_target!(|data: &[u8]| katalog_fuzz::splice_raw(data));
