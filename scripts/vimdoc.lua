-- lua5.4 scripts/vimdoc.lua: prints doc/lua-mcp.txt, Neovim's help for
-- lua-mcp, made from the manual's Markdown (SOURCES below), so that the
-- two never say different things. `make vimdoc` writes it; a spec fails
-- when the file is not what this prints.
--
-- What Markdown becomes: the first file's title heads the help file; each
-- `#` title and `##` heading a section under a ruled line with its tag
-- (*lua-mcp-SLUG*) at the right margin; `###` a sub-heading (ending in
-- `~`); bold plain text; fenced code a `>`/`<` block; links their text; HTML comments
-- nothing. Everything else is kept as written.
local SOURCES = { 'docs/neovim.md', 'docs/client.md', 'docs/async.md' }
local WIDTH = 78

local function read(path)
  local file = assert(io.open(path, 'rb'))
  local text = file:read('a')
  file:close()
  return text
end

local used = {}
-- A tag for a heading, unique in the file.
local function tag(title)
  local slug = title:lower():gsub('`', ''):gsub('[^%w]+', '-'):gsub('^%-+', ''):gsub('%-+$', '')
  local name, n = 'lua-mcp-' .. slug, 1
  while used[name] do
    n = n + 1
    name = ('lua-mcp-%s-%d'):format(slug, n)
  end
  used[name] = true
  return '*' .. name .. '*'
end

-- Text on the left and a tag at the right margin, or the tag on a line of
-- its own above when both do not fit.
local function tagged(text, tag_text)
  local gap = WIDTH - #text - #tag_text
  if gap < 1 then return (' '):rep(WIDTH - #tag_text) .. tag_text .. '\n' .. text end
  return text .. (' '):rep(gap) .. tag_text
end

local function inline(line)
  -- Bold would read as a *tag* to Neovim's help.
  line = line:gsub('%*%*(.-)%*%*', '%1')
  line = line:gsub('%[([^%]]+)%]%((https?://[^)]+)%)', '%1 <%2>')
  line = line:gsub('%[([^%]]+)%]%([^)]+%)', '%1')
  return line
end

local out = {}
local function emit(line) out[#out + 1] = line end

for index, path in ipairs(SOURCES) do
  local text = read(path):gsub('<!%-%-.-%-%->\n?', '')
  local fence = false
  for line in (text .. '\n'):gmatch('(.-)\n') do
    if fence then
      if line:match('^```') then
        emit('<')
        fence = false
      else
        emit(line == '' and '' or '    ' .. line)
      end
    elseif line:match('^```') then
      -- `>` ends the line before; the block needs one of its own.
      if out[#out] ~= '' then emit('') end
      emit('>')
      fence = true
    elseif line:match('^# ') then
      local title = line:sub(3)
      local title_tag
      if index == 1 then
        emit(tagged('*lua-mcp.txt*', title))
        emit('')
        title_tag = '*lua-mcp*' -- what :help lua-mcp opens
      end
      emit(('='):rep(WIDTH))
      emit(tagged(title:upper(), title_tag or tag(title)))
    elseif line:match('^## ') then
      local title = inline(line:sub(4))
      emit(('-'):rep(WIDTH))
      emit(tagged(title, tag(title)))
    elseif line:match('^###+ ') then
      emit(inline(line:gsub('^#+ ', '')) .. ' ~')
    else
      emit(inline(line))
    end
  end
end
emit('')
emit(' vim:tw=78:ts=8:ft=help:norl:')
io.write(table.concat(out, '\n'), '\n')
