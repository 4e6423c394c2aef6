/work/wt/h1/bench-target/release/deps/fake_mcp_server-d90a648b30606354.d: fake-server/src/main.rs fake-server/src/payload.rs fake-server/src/protocol.rs

/work/wt/h1/bench-target/release/deps/fake_mcp_server-d90a648b30606354: fake-server/src/main.rs fake-server/src/payload.rs fake-server/src/protocol.rs

fake-server/src/main.rs:
fake-server/src/payload.rs:
fake-server/src/protocol.rs:
