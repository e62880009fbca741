-- tmpfile.lua - scratch files for the reference module's stdio and HTTP
-- transports, which hand whole request streams to a child process through
-- the file system because Lua cannot hold both ends of a pipe.
local tmpfile = {}

-- os.tmpname creates the file (mkstemp) and returns its name; a suffix is
-- only cosmetic, so the file is created under the plain name and renamed.
function tmpfile.name(suffix)
  local base = os.tmpname()
  if not suffix or suffix == '' then return base end
  local path = base .. suffix
  if os.rename(base, path) then return path end
  os.remove(base)
  return base
end

function tmpfile.write(contents, suffix)
  local path = tmpfile.name(suffix)
  local f, err = io.open(path, 'wb')
  if not f then return nil, err end
  local ok, werr = f:write(contents)
  f:close()
  if not ok then
    os.remove(path)
    return nil, werr
  end
  return path
end

function tmpfile.slurp(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local data = f:read('*a')
  f:close()
  return data
end

function tmpfile.remove(...)
  for i = 1, select('#', ...) do
    local path = select(i, ...)
    if path then os.remove(path) end
  end
end

return tmpfile
