//! A fuzzing find kept as a regression: a commlens table whose dictionary-
//! encoded page lost its dictionary made the parquet crate's decoder panic
//! ("Decoder for dict should have been set"). It must be an error naming the file.
//! The file is one of our generated tables with bytes mutated by
//! `crates/parquet/tests/fuzz_parquet.rs` (case 2665).

use std::path::Path;

#[test]
fn corrupt_dictionary_page_is_an_error_not_a_panic() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corrupt-dictionary-page.parquet");
    let err = commlens_parquet::read_table(&p).expect_err("a corrupt page is an error");
    let msg = err.to_string();
    assert!(msg.contains("corrupt-dictionary-page.parquet") && msg.contains("corrupt page"), "{msg}");
}
