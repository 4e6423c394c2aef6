/work/wt/h1/bench-target/release/deps/mcp_relay-71ac948569b27cca.d: relay/src/main.rs

/work/wt/h1/bench-target/release/deps/mcp_relay-71ac948569b27cca: relay/src/main.rs

relay/src/main.rs:
