//! A 2026-07-28 server whose tools run as tasks (the Tasks extension,
//! SEP-2663) when a request declares the extension, on rmcp's
//! `TaskManager`. Over stdio by default; `--http PORT` serves Streamable
//! HTTP at http://127.0.0.1:PORT/mcp instead.
//!
//! - `slow_sum {a, b, ms}`: the sum after `ms` (300 by default); it stops
//!   when the task is cancelled.
//! - `ask_name {}`: asks the client for a name (a form elicitation inside
//!   the task), then greets it.
//! - `broken {}`: the task fails with a JSON-RPC error.
//! - `outlives_ttl {}`: a task given 300 ms to live that takes 5 s.
//! - `echo {message}`: never a task.

use std::time::Duration;

use rmcp::model::*;
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};

/// Polled this often, so that the specs run quickly.
const POLL_MS: u64 = 50;

#[derive(Clone, Default)]
struct Tasks {
    manager: TaskManager,
}

fn text(s: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

fn number(args: &JsonObject, key: &str, default: i64) -> i64 {
    args.get(key).and_then(Value::as_i64).unwrap_or(default)
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else { unreachable!("schemas are objects") };
    Tool::new(name, description, std::sync::Arc::new(schema))
}

async fn slow_sum(ctx: TaskContext, a: i64, b: i64, ms: u64) -> Result<CallToolResult, TaskExit> {
    tokio::select! {
        _ = ctx.cancelled() => Err(TaskExit::Cancelled),
        _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(text((a + b).to_string())),
    }
}

async fn ask_name(ctx: TaskContext) -> Result<CallToolResult, TaskExit> {
    let asked: InputRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "What is your name?",
            "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } } }
        }
    }))
    .map_err(|e| TaskExit::Error(ErrorData::internal_error(e.to_string(), None)))?;
    let answer = ctx.request_input("name", asked).await?;
    let name = answer.pointer("/content/name").and_then(Value::as_str).unwrap_or("nobody");
    Ok(text(format!("hello {name}")))
}

impl Tasks {
    fn start(&self, name: &str, args: JsonObject) -> Option<Task> {
        let options = TaskOptions::new().with_poll_interval_ms(POLL_MS).with_ttl_ms(60_000);
        Some(match name {
            "slow_sum" => {
                let (a, b, ms) = (number(&args, "a", 0), number(&args, "b", 0), number(&args, "ms", 300));
                self.manager.spawn(options, move |ctx| Box::pin(slow_sum(ctx, a, b, ms as u64)))
            }
            "ask_name" => self.manager.spawn(options, |ctx| Box::pin(ask_name(ctx))),
            "broken" => self.manager.spawn(options, |_| {
                Box::pin(async { Err(TaskExit::Error(ErrorData::internal_error("the disk is full", None))) })
            }),
            "outlives_ttl" => self.manager.spawn(options.with_ttl_ms(300), |ctx| Box::pin(slow_sum(ctx, 0, 0, 5_000))),
            _ => return None,
        })
    }
}

impl ServerHandler for Tasks {
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let declared = context.client_capabilities().is_some_and(|caps| caps.supports_tasks());
        let args = request.arguments.clone().unwrap_or_default();
        if declared {
            if let Some(task) = self.start(&request.name, args.clone()) {
                return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
            }
        }
        match request.name.as_ref() {
            "echo" => Ok(text(args.get("message").and_then(Value::as_str).unwrap_or("").to_string()).into()),
            "slow_sum" => Ok(text((number(&args, "a", 0) + number(&args, "b", 0)).to_string()).into()),
            "ask_name" | "broken" | "outlives_ttl" => Err(ErrorData::new(
                ErrorCode(-32021),
                "this tool runs only as a task: declare the io.modelcontextprotocol/tasks extension",
                Some(json!({ "requiredCapabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } } })),
            )),
            other => Err(ErrorData::invalid_params(format!("no tool named {other}"), None)),
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let numbers = json!({ "type": "object", "properties": {
            "a": { "type": "integer" }, "b": { "type": "integer" }, "ms": { "type": "integer" } } });
        let empty = json!({ "type": "object", "properties": {} });
        Ok(ListToolsResult::with_all_items(vec![
            tool("slow_sum", "Adds a and b after ms milliseconds", numbers),
            tool("ask_name", "Asks for a name, then greets it", empty.clone()),
            tool("broken", "A task that fails", empty.clone()),
            tool("outlives_ttl", "A task that outlives its ttl", empty),
            tool(
                "echo",
                "Echoes the message",
                json!({ "type": "object", "properties": { "message": { "type": "string" } } }),
            ),
        ]))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.manager.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.manager.update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.manager.cancel_task(&request.task_id)
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
    }
}

async fn serve_http(port: u16) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::{session::local::LocalSessionManager, StreamableHttpService};

    let tasks = Tasks::default();
    let service = TowerToHyperService::new(StreamableHttpService::new(
        move || Ok(tasks.clone()),
        LocalSessionManager::default().into(),
        Default::default(),
    ));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://127.0.0.1:{}/mcp", listener.local_addr()?.port());
    loop {
        let (stream, _) = listener.accept().await?;
        let service = service.clone();
        tokio::spawn(async move {
            let _ = Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, port] = args.as_slice() {
        if flag == "--http" {
            serve_http(port.parse()?).await?;
            return Ok(());
        }
    }
    let running = Tasks::default().serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
