---@meta mcp
-- Type definitions for editors (LuaCATS, as read by lua-language-server):
-- add lua/types to `workspace.library`. They describe the native module;
-- the pure-Lua reference has the same shape without the extra options.

---@class mcp
---@field PROTOCOL_VERSION string        The version offered in initialize ("2025-06-18").
---@field SUPPORTED_VERSIONS string[]    The versions the client accepts, newest first.
---@field CLIENT_INFO {name: string, version: string}  Sent as clientInfo; may be replaced.
---@field native true                    Set by the native module only: tells it from the pure reference.
---@field _VERSION string                "lua-mcp X.Y.Z" (native module only).
---@field null lightuserdata              A JSON null a table can hold (native module only).
local mcp = {}

---@class mcp.Options
---@field command? string|string[]     A command line for /bin/sh -c, or an argv run without a shell.
---@field url? string                  A Streamable HTTP endpoint (or an HTTP+SSE one, found by fallback).
---@field transport_kind? "http"|"sse"  "sse": the 2024-11-05 HTTP+SSE transport; "http": Streamable HTTP, no fallback (default: Streamable HTTP, falling back).
---@field transport? fun(request_text: string): boolean, string?, any  A fixture: receives exactly what the reference sends.
---@field protocol_version? string
---@field prefix? string               Prefix for mounted tool names.
---@field timeout? number              Seconds per request (default 60; 0.001 to 1e7).
---@field connect_timeout? number      Seconds for the server to start and answer initialize (default 60; 0.001 to 1e7).
---@field era? "auto"|"legacy"|"modern"  Which revision to speak (default "auto": found per server, see docs/eras.md).
---@field cache? boolean|mcp.CacheBounds  false: keep nothing a modern server allows to be kept (default true: 256 entries, 8 MiB).
---@field json_types? boolean          Results keep JSON's types: mcp.null for null, empty arrays marked as by mcp.array.
---@field env? table<string, string>   Added to the server's environment (stdio).
---@field cwd? string                  The server's working directory (stdio).
---@field max_message_bytes? integer   Largest reply accepted (default 64 MiB; at most 2^40).
---@field max_header_bytes? integer    Longest Mcp-Param-* or Mcp-Name header a request sends (default 8 KiB; at most 64 KiB).
---@field headers? table<string, string>  Sent on every HTTP request.
---@field auth? mcp.Auth                 Credentials for HTTP: a token, a user's login, or a machine's (docs/authorization.md).
---@field ca_file? string              PEM certificates to trust instead of Mozilla's roots (HTTPS).
---@field on_notification? fun(msg: mcp.Message)  Called for every server notification; `lua-mcp/notifications_dropped` ({count=N}) when some were dropped unread.
---@field handlers? table<string, fun(params: table?): (table?, string?)>  Server requests answered from Lua.
---@field capabilities? table<string, table>  Declared over what handlers imply, merged per capability: {elicitation = {form = {}, url = {}}, sampling = {tools = {}}, roots = {listChanged = true}}.
---@field extensions? table<string, table>  Extensions the client supports, by name, sent as capabilities.extensions.
---@field skills? boolean              Declares the Skills extension (io.modelcontextprotocol/skills) for client:list_skills and get_skill.
---@field on_log? fun(params: {level: string, logger?: string, data: any})  notifications/message. Set, a 2026-07-28 session asks for logs at `info` until set_log_level chooses.
---@field on_resource_updated? fun(uri: string)  notifications/resources/updated (after client:subscribe).
---@field on_list_changed? fun(kind: "tools"|"resources"|"prompts")  A list the server changed.
---@field record? string               Appends every message sent and received to this file (JSON lines; no headers; created 0600; a symbolic link is refused).
---@field replay? string               A recording to answer from instead of a server (see mcp.replay).

---@class mcp.CacheBounds               opts.cache as a table: how much the result cache keeps.
---@field max_entries? integer          Entries at most (default 256; 0 keeps nothing).
---@field max_bytes? integer            Bytes at most, as the decoded results hold them (default 8 MiB).

---@class mcp.Auth                      opts.auth: `token` alone, or the fields of a login.
---@field token? string|fun(): string   A bearer token (a function is asked before each call).
---@field authorize? fun(url: string): string?  Sends the user to log in; returns the URL the browser came back to, or nil to wait at the loopback redirect.
---@field grant? "authorization_code"|"client_credentials"|"identity_assertion"|"jwt_bearer"
---@field assertion? string           jwt_bearer: the workload's identity token (RFC 7523; SEP-1933).
---@field client_id? string             A client registered with the authorization server beforehand.
---@field client_secret? string
---@field client_metadata_url? string   A Client ID Metadata Document, used where the server supports them.
---@field client_name? string           Sent in a dynamic registration (default "lua-mcp").
---@field redirect_uri? string          Default http://127.0.0.1:<free port>/callback.
---@field login_timeout? number         Seconds to wait for the browser (default 300).
---@field private_key_pem? string       EC P-256 key (PKCS #8 or SEC1) for private_key_jwt.
---@field dpop? boolean                Binds the tokens to a key of this client's with DPoP proofs (RFC 9449; docs/authorization.md).
---@field issuer? string               The only authorization server credentials may go to.
---@field idp? {token_endpoint: string, id_token: string, client_id?: string, client_secret?: string}  Cross-app access.
---@field store? string|{load: fun(key: string): string?, save: fun(key: string, text: string)}  Where logins are kept (a file is written 0600 under a lock beside it; refused if others can write it).

---@class mcp.Tool                      A tool as the server described it in tools/list.
---@field name string
---@field title? string
---@field description? string
---@field inputSchema? table              JSON Schema of the arguments.
---@field outputSchema? table             JSON Schema of structuredContent, when the tool has one.
---@field annotations? mcp.ToolAnnotations
---@field icons? {src: string, mimeType?: string, sizes?: string[]}[]
---@field _meta? table

---@class mcp.ToolAnnotations
---@field title? string
---@field readOnlyHint? boolean
---@field destructiveHint? boolean
---@field idempotentHint? boolean
---@field openWorldHint? boolean

---@class mcp.CallResult                 The whole tools/call result, as decoded.
---@field content? mcp.ContentBlock[]
---@field structuredContent? table
---@field isError? boolean
---@field _meta? table

---@class mcp.ContentBlock
---@field type string                     "text", "image", "audio", "resource_link", "resource"
---@field text? string
---@field data? string                    Base64 (image, audio).
---@field mimeType? string
---@field uri? string
---@field resource? table

---@class mcp.Message                     A JSON-RPC message as decoded (a notification, a server request).
---@field jsonrpc string
---@field id? integer|string
---@field method? string
---@field params? table
---@field result? table
---@field error? {code: integer, message: string, data?: any}

---@class mcp.Client
---@field command? string|string[]
---@field url? string
---@field transport? function
---@field protocol_version any
---@field prefix? string
---@field next_id integer              The id of the last request; the next one is next_id + 1.
---@field tools? mcp.Tool[]            Set by discover.
---@field server_info? {name: string, version: string, title?: string}
---@field negotiated_version? string
---@field session_ready? boolean
---@field session_id? string           HTTP only.
---@field server_capabilities? table   From initialize, or server/discover (live clients).
---@field instructions? string         From initialize, or server/discover (live clients).
---@field era? "legacy"|"modern"       The revision's era the server was found to speak (live clients, once connected).
local Client = {}

---Handshake (once per session) and tools/list. Raises a string on failure.
---@return mcp.Tool[]
function Client:discover() end

---discover without waiting: the handle settles with client.tools once the list is in, the client's fields
---(tools, server_info, negotiated_version, ...) filled as discover fills them. The server starts, and its
---handshake runs, as the handle is moved on (dispatch, a wait).
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:discover_async(opts) end

---Calls a tool. A tool's own failure is not raised: it returns its text and true.
---The third return is the whole result; structuredContent is checked against the tool's outputSchema.
---@param name string
---@param args? table
---@param opts? mcp.RequestOptions    Live clients: timeout, on_progress, max_total_timeout.
---@return string text
---@return boolean is_error
---@return mcp.CallResult result
function Client:call(name, args, opts) end

---Ends the session (stops the server, or DELETEs the HTTP session). Safe twice.
function Client:close() end

---@class mcp.RequestOptions
---@field timeout? number              Seconds for this request (0.001 to 1e7; default: the client's timeout).
---@field on_progress? fun(progress: number, total?: number, message?: string)  Asks for progress; each one restarts the timeout. An error it raises ends the call (cancelled at the server) and is raised by it.
---@field max_total_timeout? number    Seconds progress cannot extend the request past.
---@field input_required? "return"  A modern server's request for input is returned (result.resultType == "input_required") instead of going to opts.handlers.
---@field input_responses? table<string, table>  Goes on from such a result: the answers, by the keys of its inputRequests.
---@field request_state? string        Goes on from such a result: its requestState, as it came.
---@field cache? "refresh"|"bypass"    "refresh": fetched and kept; "bypass": neither answered from nor kept in the cache.
---@field idempotent? boolean          Whether the request may be sent again when a modern server's reply stream breaks (default: only requests that change nothing, and tools annotated readOnlyHint or idempotentHint).
---@field rpc_error? "return"          client:request only: a JSON-RPC error is returned as nil, {code, message, data}.
---@field task? true|{ttl?: number}    tools/call: the server may run the tool as a task, followed to its end (polled at its interval; see docs/async.md). ttl: seconds a 2025-11-25 server is asked to keep it.
---@field meta? table<string, any>     Entries for the request's params._meta (e.g. traceparent = mcp.traceparent(...)); the client's own (progressToken, a modern envelope) go beside them.
---@field on_done? fun(ok: boolean, ...: any)  On the Lua thread once settled: `true, text, is_error, result` (call_async), `true, result` (request_async), or `false, err`. An error it raises is raised by the dispatch or wait that ran it; other ready callbacks then wait for the next dispatch.

---Any request, blocking. Raises `MCP METHOD failed: MESSAGE (code N)` on a JSON-RPC error
---(or, with opts.rpc_error = "return", returns nil and the error's {code, message, data}).
---@param method string
---@param params? table
---@param opts? mcp.RequestOptions
---@return table? result
---@return {code: integer|string, message: string, data?: any}? error
function Client:request(method, params, opts) end

---Sends tools/call and returns at once.
---@param name string
---@param args? table
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:call_async(name, args, opts) end

---call_async with opts.task = true: the server may run the tool as a task; h:status() shows it.
---@param name string
---@param args? table
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:call_task(name, args, opts) end

---Sends any request and returns at once.
---@param method string
---@param params? table
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:request_async(method, params, opts) end

---A descriptor for an event loop: readable whenever dispatch has something to run.
---@return integer fd
function Client:fd() end

---Runs what is ready (on_notification, handlers, on_done, timeouts) without blocking.
---@return integer ran  how many callbacks ran
function Client:dispatch() end

---Sends a notification.
---@param method string
---@param params? table
function Client:notify(method, params) end

---Tells the server the roots a roots/list handler gives have changed (notifications/roots/list_changed),
---so that it lists them again. Declare it: opts.capabilities = {roots = {listChanged = true}}.
function Client:roots_changed() end

---@param opts? mcp.RequestOptions
---@return true
function Client:ping(opts) end

---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:ping_async(opts) end

---tools/list, every page (client.tools is left as discover set it).
---@param opts? mcp.RequestOptions
---@return mcp.Tool[]
function Client:list_tools(opts) end

---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:list_tools_async(opts) end

---@class mcp.Resource
---@field uri string
---@field name string
---@field title? string
---@field description? string
---@field mimeType? string
---@field size? integer

---@param opts? mcp.RequestOptions
---@return mcp.Resource[]
function Client:list_resources(opts) end

---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:list_resources_async(opts) end

---@param opts? mcp.RequestOptions
---@return {uriTemplate: string, name: string, description?: string, mimeType?: string}[]
function Client:list_resource_templates(opts) end

---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:list_resource_templates_async(opts) end

---The resource's contents: each with uri, mimeType, and text or blob (base64).
---@param uri string
---@param opts? mcp.RequestOptions
---@return {uri: string, mimeType?: string, text?: string, blob?: string}[]
function Client:read_resource(uri, opts) end

---@param uri string
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:read_resource_async(uri, opts) end

---notifications/resources/updated for it then reach opts.on_resource_updated.
---@param uri string
---@param opts? mcp.RequestOptions
---@return table
function Client:subscribe(uri, opts) end

---@param uri string
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:subscribe_async(uri, opts) end

---@param uri string
---@param opts? mcp.RequestOptions
---@return table
function Client:unsubscribe(uri, opts) end

---@param uri string
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:unsubscribe_async(uri, opts) end

---@param opts? mcp.RequestOptions
---@return {name: string, title?: string, description?: string, arguments?: {name: string, description?: string, required?: boolean}[]}[]
function Client:list_prompts(opts) end

---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:list_prompts_async(opts) end

---@class mcp.SkillEntry              A skill as skills/list describes it.
---@field uri string                    Its SKILL.md (skill://.../SKILL.md).
---@field frontmatter {name: string, description: string, [string]: any}
---@field resources {uri: string, digest: string, size: integer}[]  Every file, SKILL.md included.

---@class mcp.Skill                     A skill loaded: its SKILL.md checked against the listing.
---@field name string
---@field uri string
---@field frontmatter table
---@field text string                   The whole SKILL.md.
---@field body string                   The Markdown after the frontmatter.
---@field files {path: string, uri: string, size: integer}[]  Its other files, read with read_skill_file.

---@param opts? mcp.RequestOptions
---@return mcp.SkillEntry[]
function Client:list_skills(opts) end

---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:list_skills_async(opts) end

---@param name string                   The skill's name or its SKILL.md URI, from the last list_skills.
---@param opts? mcp.RequestOptions
---@return mcp.Skill
function Client:get_skill(name, opts) end

---@param name string
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:get_skill_async(name, opts) end

---@param name string
---@param path string                   Relative to the skill's folder (a loaded skill's files[i].path).
---@param opts? mcp.RequestOptions
---@return string
function Client:read_skill_file(name, path, opts) end

---@param name string
---@param path string
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:read_skill_file_async(name, path, opts) end

---@param uri string                    A skill's folder, where the server offers resources/directory/read.
---@param opts? mcp.RequestOptions
---@return {uri: string, name?: string, mimeType?: string}[]
function Client:list_skill_directory(uri, opts) end

---@param uri string
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:list_skill_directory_async(uri, opts) end

---@param name string
---@param args? table<string, string>
---@param opts? mcp.RequestOptions
---@return {description?: string, messages: {role: string, content: mcp.ContentBlock}[]}
function Client:get_prompt(name, args, opts) end

---@param name string
---@param args? table<string, string>
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:get_prompt_async(name, args, opts) end

---@param ref {type: "ref/prompt", name: string}|{type: "ref/resource", uri: string}
---@param argument {name: string, value: string}
---@param context? {arguments?: table<string, string>}
---@param opts? mcp.RequestOptions
---@return {values: string[], total?: integer, hasMore?: boolean}
function Client:complete(ref, argument, context, opts) end

---@param ref table
---@param argument {name: string, value: string}
---@param context? table
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:complete_async(ref, argument, context, opts) end

---@param level "debug"|"info"|"notice"|"warning"|"error"|"critical"|"alert"|"emergency"
---@param opts? mcp.RequestOptions
---@return table
function Client:set_log_level(level, opts) end

---@param level string
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:set_log_level_async(level, opts) end

-- The reference's low-level methods.

---The next request id (client.next_id + 1, which it becomes).
---@return integer
function Client:id() end

---The initialize request, with a fresh id.
---@return mcp.Message
function Client:initialize_msg() end

---Messages to put before an exchange: the reference's handshake through a
---fixture; none on a live session, which handshakes by itself.
---@return mcp.Message[]
function Client:handshake() end

---Sends the messages; returns the replies by id and the notifications that came.
---@param messages mcp.Message[]
---@return table<integer|string, mcp.Message> by_id
---@return mcp.Message[] notifications
function Client:exchange(messages) end

---@class mcp.Handle
local Handle = {}

---What call (or request) returns, or raises its error. With a timeout, nothing if it passes first.
---@param timeout? number
---@return any ...
function Handle:wait(timeout) end

---True once settled (a reply, an error, a timeout); never waits.
---@return boolean
function Handle:done() end

---The task the server made of a call, as it last described it (taskId, status, statusMessage, ...), or nil.
---@return table?
function Handle:status() end

---Sends notifications/cancelled (tasks/cancel for a task); the handle fails with `MCP METHOD cancelled`. False if already settled.
---@param reason? string
---@return boolean
function Handle:cancel(reason) end

---The index of a settled handle, or nil at the timeout.
---@param handles mcp.Handle[]
---@param timeout? number
---@return integer?
function mcp.wait_any(handles, timeout) end

---True once every handle has settled, or nil at the timeout.
---@param handles mcp.Handle[]
---@param timeout? number
---@return true?
function mcp.wait_all(handles, timeout) end

---@param opts mcp.Options
---@return mcp.Client
function mcp.new(opts) end


---@class mcp.Registry                 What an agent keeps its tools in: mcp.mount needs get and add.
---@field get fun(self: mcp.Registry, name: string): any
---@field add fun(self: mcp.Registry, tool: mcp.RegistryTool)

---@class mcp.RegistryTool               What mcp.mount passes to registry:add.
---@field name string                    The tool's name with the client's prefix.
---@field description string             Whitespace folded, cut to 120 characters.
---@field args mcp.ToolArg[]             From the inputSchema, in property order.
---@field requires_approval boolean      not opts.trust
---@field run fun(args: table): string   Calls the tool; raises its text when the tool reports an error.

---@class mcp.ToolArg
---@field name string
---@field type "string"|"number"|"integer"|"boolean"|"array"|"object"
---@field required boolean

---@class mcp.MountOptions
---@field prefix? string                 Before each tool's name.
---@field trust? boolean                 requires_approval = false.
---@field watch? boolean                 Keep the registry (or the search index) in step with the server's tool list.
---@field include? string[]              Names or patterns with `*` to mount; exclude? the ones not to.
---@field exclude? string[]
---@field approve? fun(tool: table, args: table, annotations: table?, client: mcp.Client): boolean, string?  Asked before each run.
---@field search? boolean                mcp_search_tools and mcp_call_tool instead of every tool (docs/client.md#many-tools).
---@field max_output? integer            Bytes (512 or more): past them a tool's text is cut, the whole kept for mcp_read_output.
---@field code? boolean                  mcp_run_lua: a sandboxed Lua chunk calls the tools as tools[NAME](args).

---Adds a server's tools to a registry; returns the names added (behind search, the names indexed).
---@param registry mcp.Registry
---@param client mcp.Client
---@param opts? mcp.MountOptions
---@return string[]
function mcp.mount(registry, client, opts) end

---mcp.mount without waiting: the tools are listed with discover_async and mounted once the list is in.
---opts.on_done gets the names added, or nil and the error. Returns the listing's handle.
---@param registry mcp.Registry
---@param client mcp.Client
---@param opts? {prefix?: string, trust?: boolean, watch?: boolean, timeout?: number, on_done?: fun(names: string[]?, err: string?)}
---@return mcp.Handle
function mcp.mount_async(registry, client, opts) end

---Seconds on a monotonic clock.
---@return number
function mcp.clock() end

---A W3C traceparent (`00-TRACE-SPAN-01`) for opts.meta: a new trace with no argument; the
---host's trace ({trace_id = 32 hex, span_id? = 16 hex, sampled? = true}); or, given a
---traceparent string, a child span in that trace. Raises on ids that are not lowercase hex.
---@param from? string|{trace_id?: string, span_id?: string, sampled?: boolean}
---@return string
function mcp.traceparent(from) end

---A client whose server is a recording made with `opts.record`: each request is answered
---with the reply recorded for the same method and params.
---@param path string
---@param opts? mcp.Options
---@return mcp.Client
function mcp.replay(path, opts) end

---JSON text to a Lua value, with the contract replies have (null deletes a key, integers stay integers).
---With `opts.json_types`, null is mcp.null and empty arrays are marked as by mcp.array.
---@param text string
---@param opts? {json_types?: boolean}
---@return any
function mcp.json_decode(text, opts) end

---Marks a table as a JSON array (an empty one goes out as []); nil gives a new empty one.
---@generic T: table
---@param t? T
---@return T
function mcp.array(t) end

---Marks a table as a JSON object (a sequence goes out with "1", "2", ... keys; an empty one as {}).
---@generic T: table
---@param t? T
---@return T
function mcp.object(t) end

---A Lua value to JSON text, as arguments are encoded.
---@param value any
---@return string
function mcp.json_encode(value) end

---@class mcp.ServerSpec : mcp.Options    One server of a config file, as mcp.new options.
---@field name string
---@field disabled boolean
---@field auto_approve string[]           Tools mounted with requires_approval = false (autoApprove, alwaysAllow).
---@field config_file? string             The file it came from (nil for a table).

---@class mcp.ConfigOptions
---@field env? table<string, string>      Variables instead of the process environment.
---@field workspace? string               ${workspaceFolder}; for a table, where relative cwd and envFile start (a file's own directory is where they start for a file).
---@field input? fun(id: string, spec: table?): string  Supplies ${input:ID} (VS Code's inputs).

---Reads an mcpServers file (Claude, Cursor, Cline, Windsurf) or a VS Code mcp.json, or such a table; or a list
---of them in order (the user's, then a project's), a later one's server of a name replacing an earlier one's and
---a file that is not there skipped.
---@param source string|table|(string|table)[]
---@param opts? mcp.ConfigOptions
---@return table<string, mcp.ServerSpec>
function mcp.load_config(source, opts) end

---Clients by name for the enabled servers; nothing starts until a client is used.
---@param specs table<string, mcp.ServerSpec>
---@param opts? mcp.Options              Given to every client, under each server's own options.
---@return table<string, mcp.Client>
function mcp.connect(specs, opts) end

---Mounts every client's tools as NAME_tool (or opts.prefix(name) .. tool); returns the names mounted
---and, by server name, the error of each server that failed.
---@param registry mcp.Registry
---@param clients table<string, mcp.Client>
---@param opts? {prefix?: fun(name: string): string, trust?: boolean, approve?: function, include?: string[], exclude?: string[], search?: boolean, max_output?: integer, code?: boolean}
---@return string[] mounted
---@return table<string, string> failed
function mcp.mount_all(registry, clients, opts) end

---mcp.mount_all without waiting: every server starts and lists its tools at once, each mounted as soon as
---its list is in; a slow or failing one holds none of the others. opts.on_server runs after each server,
---opts.on_done once all have settled, with mount_all's returns. Returns the listings' handles by name.
---@param registry mcp.Registry
---@param clients table<string, mcp.Client>
---@param opts? {prefix?: fun(name: string): string, trust?: boolean, search?: boolean, max_output?: integer, code?: boolean, on_server?: fun(name: string, names: string[]?, err: string?), on_done?: fun(mounted: string[], failed: table<string, string>)}
---@return table<string, mcp.Handle>
function mcp.mount_all_async(registry, clients, opts) end

---@class mcp.ServerOptions
---@field name string                     The server's name, which clients show.
---@field version? string                 Its version (default "0.0.0").
---@field title? string
---@field instructions? string            Sent in initialize: how to use this server.
---@field page_size? integer              Items per page of every listing (default 0: all at once).
---@field max_message_bytes? integer      The longest line read from the client (default 16 MiB).
---@field request_timeout? number         Seconds a handler waits for the client to answer ctx:request (default 300).

---@class mcp.ListenOptions
---@field host? string                    An IP address or "localhost" (default 127.0.0.1); beyond loopback a token is required.
---@field port? integer                   0 (default): any free port.
---@field path? string                    Default "/mcp".
---@field token? string                   Required of clients as Authorization: Bearer TOKEN.
---@field allowed_hosts? string[]         Host names accepted besides the loopback ones.
---@field allowed_origins? string[]       Browser origins accepted besides those of the allowed hosts.
---@field discovery? string               A file (0600) written once bound with the URL, token and pid; removed at close.
---@field until_stdin_ends? boolean       Serving ends when this process's stdin does (Unix).
---@field max_connections? integer        Default 512.
---@field max_sessions? integer           Default 1024.
---@field session_idle? number            Seconds unused before a session ends (default 3600).
---@field read_timeout? number            Seconds from a request's first byte to its last (default 30).

---@class mcp.ToolDefinition
---@field name string
---@field title? string
---@field description? string
---@field input_schema? table             JSON Schema of the arguments, checked before the handler runs (default: any object).
---@field output_schema? table            JSON Schema of the structured content a returned table becomes, checked after.
---@field annotations? table              readOnlyHint, destructiveHint, idempotentHint, openWorldHint.
---@field execution? {taskSupport: "optional"|"required"|"forbidden"}  May it run as a task (the Tasks extension).
---@field icons? table[]

---@class mcp.ResourceDefinition
---@field uri? string                     A resource's address (server:resource).
---@field uri_template? string            A template's RFC 6570 template, as notes://{day} (server:resource_template).
---@field name string
---@field title? string
---@field description? string
---@field mime_type? string
---@field complete? table<string, string[]|fun(value: string, context: table?): string[]>  Completions of a template's variables.

---@class mcp.PromptDefinition
---@field name string
---@field title? string
---@field description? string
---@field arguments? {name: string, description?: string, required?: boolean}[]
---@field complete? table<string, string[]|fun(value: string, context: table?): string[]>  Completions of its arguments.

---What a handler gets beside its arguments: the request's meta and ways to talk to the client while it runs.
---@class mcp.Context
---@field request_id integer|string
---@field meta? table                     The request's _meta.
local Context = {}

---Reports progress, if the client asked for it.
---@param done number
---@param total? number
---@param message? string
function Context:progress(done, total, message) end

---A log message to the client, at or above the level it set.
---@param level "debug"|"info"|"notice"|"warning"|"error"|"critical"|"alert"|"emergency"
---@param data any
---@param logger? string
function Context:log(level, data, logger) end

---Whether the client cancelled this request (what it sent meanwhile is read, not waited for).
---@return boolean
function Context:cancelled() end

---Asks the client (elicitation/create, sampling/createMessage, roots/list) and waits for its answer;
---nil and why when it cannot or would not answer. With a callback it returns at once, and the
---callback gets the answer (or nil and why) from dispatch, run or serve_stdio.
---@param method string
---@param params? table
---@param callback? fun(result: table?, why: string?)
---@return table? result
---@return string? why
function Context:request(method, params, callback) end

---@param params table                    message and requestedSchema
---@param callback? fun(result: table?, why: string?)
---@return table? result                  {action = "accept"|"decline"|"cancel", content = {...}}
---@return string? why
function Context:elicit(params, callback) end

---@param params table
---@param callback? fun(result: table?, why: string?)
---@return table? result
---@return string? why
function Context:sample(params, callback) end

---@param callback? fun(roots: table[]?, why: string?)
---@return table[]? roots
---@return string? why
function Context:roots(callback) end

---Several requests to the client at once, by key ({ key = { method = ..., params = ... } }): the answers by key,
---or nil and why. Of a 2026-07-28 client the handler ends here and runs again with the answers.
---@param requests table<string, {method: string, params?: table}>
---@return table<string, table>? answers
---@return string? why
function Context:ask(requests) end

---Whether the client declared a capability ("elicitation", "sampling", "roots").
---@param capability string
---@return boolean
function Context:client_can(capability) end

---Returned by a handler that answers later, with ctx:finish.
---@return table
function Context:later() end

---The answer of a handler that returned ctx:later(): what it would have returned, or nil and a message.
---@param value any
---@param message? string
function Context:finish(value, message) end

---Over HTTP: ends this request's event stream before its reply; the client resumes it for the rest.
function Context:close_stream() end

---A Lua program as an MCP server (docs/server.md).
---@class mcp.Server
local Server = {}

---@param def mcp.ToolDefinition
---@param handler fun(args: table, ctx: mcp.Context): any, string?
function Server:tool(def, handler) end

---@param def mcp.ResourceDefinition
---@param handler fun(uri: string, ctx: mcp.Context): string|table|nil, string?
function Server:resource(def, handler) end

---@param def mcp.ResourceDefinition
---@param handler fun(uri: string, vars: table<string, string>, ctx: mcp.Context): string|table|nil, string?
function Server:resource_template(def, handler) end

---@param def mcp.PromptDefinition
---@param handler fun(args: table, ctx: mcp.Context): string|table|nil, string?
function Server:prompt(def, handler) end

---@class mcp.SkillDefinition
---@field name string                     1 to 64 lower-case letters, digits and single hyphens.
---@field description string
---@field body? string                    The Markdown of its SKILL.md, after the frontmatter.
---@field files? table<string, string>    Files beside SKILL.md: relative path -> contents.
---@field frontmatter? table              More frontmatter fields.

---Offers a skill (the Skills extension): listed with each file's digest and size, read as resources.
---@param def mcp.SkillDefinition
function Server:skill(def) end

---Removes a tool, resource, template or prompt; the client hears that the list changed.
---@param kind "tool"|"resource"|"resource_template"|"prompt"
---@param name string                     Its name (a resource's uri, a template's uri_template).
---@return boolean removed
function Server:remove(kind, name) end

---Subscribers of the resource hear that it changed.
---@param uri string
function Server:resource_updated(uri) end

---Serves over this process's stdin and stdout until stdin ends (true), Ctrl-C or server:close().
---@return true
function Server:serve_stdio() end

---Serves over Streamable HTTP from now on; returns at once with the URL bound.
---@param opts? mcp.ListenOptions
---@return string url
function Server:listen(opts) end

---A descriptor readable whenever dispatch has requests to answer (after listen).
---@return integer
function Server:fd() end

---Answers the requests that have arrived, without waiting; how many.
---@return integer
function Server:dispatch() end

---Serves until closed (false) or for `seconds` (true: serving goes on).
---@param seconds? number
---@return boolean
function Server:run(seconds) end

---Ends serving: at once, or from a handler once its answer is sent; the listener and discovery file go.
function Server:close() end

---A server whose tools, resources and prompts are Lua functions.
---@param opts mcp.ServerOptions
---@return mcp.Server
function mcp.server(opts) end

return mcp
