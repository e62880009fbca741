//! The rmcp client (`().serve(transport)`, `call_tool`), timed the way
//! bench/run.lua times the Lua modules and bench/ts_client.mjs the
//! TypeScript SDK:
//!
//!   rmcp-bench-client stdio '["cmd","arg"]' TOOL ARGS_JSON N OUT_FILE
//!   rmcp-bench-client http URL TOOL ARGS_JSON N OUT_FILE
//!
//! Writes `{ connect_ms, list_ms, calls_us: [...] }` to OUT_FILE. One
//! thread (tokio's current-thread runtime), as a Lua host has: pinned to
//! one CPU, a multi-threaded runtime only adds hand-offs.

use std::time::Instant;

use rmcp::model::CallToolRequestParams;
#[cfg(feature = "http")]
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

type Failure = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Failure> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let [mode, target, tool, args, n, out] = argv.as_slice() else {
        return Err("usage: rmcp-bench-client stdio|http TARGET TOOL ARGS_JSON N OUT_FILE".into());
    };
    let arguments = match serde_json::from_str::<Value>(args)? {
        Value::Object(map) => map,
        _ => return Err("ARGS_JSON must be an object".into()),
    };
    let n: usize = n.parse()?;

    let started = Instant::now();
    let client = match mode.as_str() {
        "stdio" => {
            let command: Vec<String> = serde_json::from_str(target)?;
            let mut process = tokio::process::Command::new(&command[0]);
            process.args(&command[1..]).stderr(std::process::Stdio::null());
            ().serve(TokioChildProcess::new(process)?).await?
        }
        #[cfg(feature = "http")]
        _ => ().serve(StreamableHttpClientTransport::from_uri(target.as_str())).await?,
        #[cfg(not(feature = "http"))]
        _ => return Err("built without the http feature: stdio only".into()),
    };
    let connected = started.elapsed();
    client.list_all_tools().await?;
    let listed = started.elapsed() - connected;

    let mut calls_us = Vec::with_capacity(n);
    for _ in 0..n {
        let call = CallToolRequestParams::new(tool.clone()).with_arguments(arguments.clone());
        let t = Instant::now();
        client.call_tool(call).await?;
        calls_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    client.cancel().await?;
    let report = json!({
        "connect_ms": connected.as_secs_f64() * 1e3,
        "list_ms": listed.as_secs_f64() * 1e3,
        "calls_us": calls_us,
    });
    std::fs::write(out, format!("{report}\n"))?;
    Ok(())
}
