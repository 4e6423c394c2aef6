/work/wt/h1/bench-target/release/libminijson.rlib: /work/shared/bench/minijson/src/lib.rs /work/shared/bench/minijson/src/parse.rs /work/shared/bench/minijson/src/skim.rs
