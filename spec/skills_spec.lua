-- Skills (SEP-2640) as this client loads them: client:list_skills,
-- get_skill, read_skill_file and list_skill_directory (and their _async
-- forms), against the Lua server of lua/examples/notes_server.lua, the
-- Rust SDK's skills server (rmcp's SkillCatalog over spec/servers/skills),
-- and spec/servers/tampered_skill.lua, which reads back other than it
-- lists. Nothing is read before get_skill; nothing of a file that fails
-- its size, digest or frontmatter reaches Lua, and no file of its skill
-- is read after.
local H = require('helpers')

local mcp = H.native()
local NOTES = { H.LUA, H.ROOT .. '/lua/examples/notes_server.lua' }
local RMCP = H.ROOT .. '/target/peers/release/rmcp-skills-peer'
local peer_it = H.WINDOWS and pending or it

local function tampered(mode)
  return mcp.new({ command = { H.LUA, H.ROOT .. '/spec/servers/tampered_skill.lua', mode }, skills = true })
end

-- The URIs the tampered server was asked to read, in order.
local function reads(client)
  local text = client:call('reads', {})
  local uris = {}
  for uri in text:gmatch('\n([^\n]+)') do uris[#uris + 1] = uri end
  return uris
end

describe('skills', function()
  it('opts.skills declares the extension; without it nothing is declared', function()
    local with = mcp.new({ command = NOTES, skills = true })
    local without = mcp.new({ command = NOTES })
    assert.same({}, with:initialize_msg().params.capabilities.extensions['io.modelcontextprotocol/skills'])
    assert.is_nil(without:initialize_msg().params.capabilities.extensions)
    assert.has_error(function() mcp.new({ command = NOTES, skills = 'yes' }) end, 'mcp.new: opts.skills must be a boolean')
    with:close()
    without:close()
  end)

  it('a Lua server\'s skill: listed, then its SKILL.md checked and loaded, then its file', function()
    local client = mcp.new({ command = NOTES, skills = true })
    local listed = client:list_skills()
    assert.equal(1, #listed)
    assert.same({ 'skill://notes/note-taking/SKILL.md', 'note-taking' }, { listed[1].uri, listed[1].frontmatter.name })
    local skill = client:get_skill('note-taking')
    assert.same({ 'note-taking', 'skill://notes/note-taking/SKILL.md' }, { skill.name, skill.uri })
    assert.equal('How notes are kept here: one per day, short', skill.frontmatter.description)
    assert.truthy(skill.text:find('^%-%-%-\n'))
    assert.equal(skill.text:sub(-#skill.body), skill.body)
    assert.same({ 'references/format.md' }, { skill.files[1].path })
    local format = client:read_skill_file('note-taking', 'references/format.md')
    assert.equal(skill.files[1].size, #format)
    -- Async: the same, through handles.
    assert.same(skill, client:get_skill_async('skill://notes/note-taking/SKILL.md'):wait(10))
    assert.equal(format, client:read_skill_file_async('note-taking', 'references/format.md'):wait(10))
    client:close()
  end)

  it('nothing is read before get_skill, and a file not before its SKILL.md', function()
    local client = tampered('none')
    assert.has_error(function() client:get_skill('pdf-forms') end,
      "the server's last skills/list has no skill named pdf-forms: call client:list_skills() first")
    client:list_skills()
    assert.same({}, reads(client))
    assert.has_error(function() client:read_skill_file('pdf-forms', 'references/FIELDS.md') end,
      'the skill pdf-forms is not loaded: call client:get_skill first (a skill\'s files are read only once its'
        .. ' SKILL.md passed its checks)')
    assert.has_error(function() client:read_skill_file('pdf-forms', 'references/NONE.md') end,
      'the skill pdf-forms has no file references/NONE.md in the server\'s last skills/list')
    assert.same({}, reads(client))
    client:get_skill('pdf-forms')
    assert.equal('name, date\n', client:read_skill_file('pdf-forms', 'references/FIELDS.md'))
    assert.same({ 'skill://tampered/pdf-forms/SKILL.md', 'skill://tampered/pdf-forms/references/FIELDS.md' },
      reads(client))
    client:close()
  end)

  local refusals = {
    size = '63 bytes came where the listing said 62',
    digest = 'its SHA-256 digest is not the one the listing gave',
    frontmatter = 'its frontmatter\'s description is not what the listing said',
  }
  for _, mode in ipairs({ 'size', 'digest', 'frontmatter' }) do
    it('a SKILL.md whose ' .. mode .. ' is not the listing\'s is refused, and its files stay unread', function()
      local client = tampered(mode)
      client:list_skills()
      assert.has_error(function() client:get_skill('pdf-forms') end,
        'the skill file skill://tampered/pdf-forms/SKILL.md failed verification (' .. refusals[mode]
          .. '); it was not used')
      assert.has_error(function() client:read_skill_file('pdf-forms', 'references/FIELDS.md') end)
      local handle = client:get_skill_async('pdf-forms')
      local ok, err = pcall(handle.wait, handle, 10)
      assert.same({ false, 'the skill file skill://tampered/pdf-forms/SKILL.md failed verification ('
        .. refusals[mode] .. '); it was not used' }, { ok, err })
      assert.same({ 'skill://tampered/pdf-forms/SKILL.md', 'skill://tampered/pdf-forms/SKILL.md' }, reads(client))
      client:close()
    end)
  end

  peer_it('the Rust SDK\'s skills server (rmcp 3.11 SkillCatalog): listed, loaded, its folder read #peer', function()
    local client = mcp.new({ command = { RMCP, H.ROOT .. '/spec/servers/skills' }, skills = true })
    local listed = client:list_skills()
    assert.same({ 'skill://pdf-forms/SKILL.md' }, { listed[1].uri })
    local skill = client:get_skill('pdf-forms')
    -- YAML the server read for its listing, read here again from the file.
    assert.same({ owner = 'docs-team', tags = { 'pdf', 'forms' } }, skill.frontmatter.metadata)
    assert.truthy(skill.body:find('# Filling PDF forms', 1, true))
    assert.same({ 'references/FIELDS.md' }, { skill.files[1].path })
    assert.equal('# Fields\n\nname, date, signature\n', client:read_skill_file('pdf-forms', 'references/FIELDS.md'))
    local entries = client:list_skill_directory('skill://pdf-forms')
    local uris = {}
    for _, entry in ipairs(entries) do uris[#uris + 1] = entry.uri end
    table.sort(uris)
    assert.same({ 'skill://pdf-forms/SKILL.md', 'skill://pdf-forms/references' }, uris)
    assert.equal(#entries, #client:list_skill_directory_async('skill://pdf-forms'):wait(10))
    client:close()
  end)
end)
