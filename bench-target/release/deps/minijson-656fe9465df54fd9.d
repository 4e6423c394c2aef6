/work/wt/h1/bench-target/release/deps/minijson-656fe9465df54fd9.d: minijson/src/lib.rs minijson/src/parse.rs minijson/src/skim.rs

/work/wt/h1/bench-target/release/deps/libminijson-656fe9465df54fd9.rlib: minijson/src/lib.rs minijson/src/parse.rs minijson/src/skim.rs

/work/wt/h1/bench-target/release/deps/libminijson-656fe9465df54fd9.rmeta: minijson/src/lib.rs minijson/src/parse.rs minijson/src/skim.rs

minijson/src/lib.rs:
minijson/src/parse.rs:
minijson/src/skim.rs:
