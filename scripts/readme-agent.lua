-- The README's first agent, for the install check (scripts/dist-check.sh)
-- to run from an installed tree exactly as a newcomer would:
--   lua5.4 scripts/readme-agent.lua write FILE     the agent's code, to FILE
--   lua5.4 scripts/readme-agent.lua check OUTPUT   fails unless OUTPUT (a file
--                                                  of what it printed) has every
--                                                  line its `runs` marker expects
local mode, path = arg[1], arg[2]
local readme = assert(io.open('README.md')):read('a')
local section = assert(readme:match('\n## A first agent\n(.-)\n## '), 'README.md has no "A first agent" section')
local marker, code = section:match('<!%-%- runs: (.-) %-%->\n```lua\n(.-)\n```')
assert(code, 'the first agent is not a lua block under a runs marker')

if mode == 'write' then
  local file = assert(io.open(path, 'w'))
  file:write(code, '\n')
  file:close()
elseif mode == 'check' then
  local output = assert(io.open(path)):read('a')
  local missing = 0
  for quoted in marker:gmatch('expect (%b"")') do
    local text = assert(load('return ' .. quoted))()
    if not output:find(text, 1, true) then
      io.stderr:write(('the first agent did not print %s\n'):format(quoted))
      missing = missing + 1
    end
  end
  if missing > 0 then
    io.stderr:write('it printed:\n', output)
    os.exit(1)
  end
else
  error('usage: readme-agent.lua write FILE | check OUTPUT')
end
