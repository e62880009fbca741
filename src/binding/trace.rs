//! `mcp.traceparent`: a W3C `traceparent` for a request's `opts.meta`,
//! from nothing (a new trace), from the host's trace and span ids, or as
//! the child of a `traceparent` the host was given (see trace_context.rs).

use mlua::{MultiValue, Table, Value};

use super::lua::{arg, lua_type, Cx, Outcome};
use crate::error::Error;
use crate::trace_context::TraceContext;

pub(super) fn traceparent(lua: &Cx, args: MultiValue) -> Outcome {
    let context = match arg(&args, 0) {
        Value::Nil => TraceContext::new_trace(true)?,
        Value::String(header) => TraceContext::parse(&header.to_string_lossy())?.child()?,
        Value::Table(opts) => from_options(&opts)?,
        other => {
            let why =
                format!("mcp.traceparent: expected nothing, a traceparent string or a table, got {}", lua_type(&other));
            return Err(Error::BadInput(why).into());
        }
    };
    Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(context.header())?)]))
}

/// `{trace_id = ..., span_id = ..., sampled = ...}`, each optional.
fn from_options(opts: &Table) -> Outcome<TraceContext> {
    let text = |name: &str| -> Outcome<Option<String>> {
        match opts.get::<Value>(name)? {
            Value::Nil => Ok(None),
            Value::String(s) => Ok(Some(s.to_string_lossy())),
            other => {
                Err(Error::BadInput(format!("mcp.traceparent: opts.{name} must be a string, got {}", lua_type(&other)))
                    .into())
            }
        }
    };
    let sampled = match opts.get::<Value>("sampled")? {
        Value::Nil => true,
        Value::Boolean(b) => b,
        other => {
            let why = format!("mcp.traceparent: opts.sampled must be a boolean, got {}", lua_type(&other));
            return Err(Error::BadInput(why).into());
        }
    };
    let span_id = text("span_id")?;
    Ok(match text("trace_id")? {
        Some(trace_id) => TraceContext::within(&trace_id, span_id.as_deref(), sampled)?,
        None if span_id.is_some() => {
            return Err(Error::BadInput("mcp.traceparent: opts.span_id needs opts.trace_id".into()).into())
        }
        None => TraceContext::new_trace(sampled)?,
    })
}
