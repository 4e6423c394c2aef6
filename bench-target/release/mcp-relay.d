/work/wt/h1/bench-target/release/mcp-relay: /work/shared/bench/relay/src/main.rs
