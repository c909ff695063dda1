//! Load generator (grows with the benchmark suite).
fn main() {}
