-- lua5.4 scripts/rock-manifest.lua DIR: prints the rock_manifest of the
-- rock tree in DIR, as LuaRocks writes it: one table per directory, each
-- file's MD5 (hex) under its name, keys sorted.
local root = assert(arg[1], 'usage: rock-manifest.lua DIR')

local function run(command)
  local pipe = assert(io.popen(command))
  local out = pipe:read('a')
  assert(pipe:close(), command)
  return out
end

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local tree = {}
for line in run('cd ' .. quote(root) .. ' && find . -type f ! -name rock_manifest -exec md5sum {} +'):gmatch('[^\n]+') do
  local md5, path = line:match('^(%x+)  %./(.+)$')
  local node = tree
  local parts = {}
  for part in path:gmatch('[^/]+') do parts[#parts + 1] = part end
  for i = 1, #parts - 1 do
    node[parts[i]] = node[parts[i]] or {}
    node = node[parts[i]]
  end
  node[parts[#parts]] = md5
end

local function write(node, indent, out)
  local keys = {}
  for key in pairs(node) do keys[#keys + 1] = key end
  table.sort(keys)
  for i, key in ipairs(keys) do
    local name = key:match('^[%a_][%w_]*$') and key or ('[%q]'):format(key)
    local value = node[key]
    local comma = i < #keys and ',' or ''
    if type(value) == 'table' then
      out[#out + 1] = indent .. name .. ' = {'
      write(value, indent .. '   ', out)
      out[#out + 1] = indent .. '}' .. comma
    else
      out[#out + 1] = ('%s%s = "%s"%s'):format(indent, name, value, comma)
    end
  end
end

local out = { 'rock_manifest = {' }
write(tree, '   ', out)
out[#out + 1] = '}'
io.write(table.concat(out, '\n'), '\n')
