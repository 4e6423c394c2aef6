/work/wt/h1/bench-target/release/deps/mcp_bench-ac0256e18a94844d.d: driver/src/main.rs driver/src/child.rs driver/src/cli.rs driver/src/outcome.rs driver/src/pipeline.rs driver/src/scenarios.rs driver/src/session.rs driver/src/stats.rs driver/src/summarize.rs driver/src/verify.rs driver/src/workload.rs

/work/wt/h1/bench-target/release/deps/mcp_bench-ac0256e18a94844d: driver/src/main.rs driver/src/child.rs driver/src/cli.rs driver/src/outcome.rs driver/src/pipeline.rs driver/src/scenarios.rs driver/src/session.rs driver/src/stats.rs driver/src/summarize.rs driver/src/verify.rs driver/src/workload.rs

driver/src/main.rs:
driver/src/child.rs:
driver/src/cli.rs:
driver/src/outcome.rs:
driver/src/pipeline.rs:
driver/src/scenarios.rs:
driver/src/session.rs:
driver/src/stats.rs:
driver/src/summarize.rs:
driver/src/verify.rs:
driver/src/workload.rs:
