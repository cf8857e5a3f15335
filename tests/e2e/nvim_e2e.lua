-- Headless Neovim (0.11) as a second, independent LSP client of `python -m lsp_server`: the same checks as
-- the VS Code probe, through Neovim's built-in client. Run by e2e.sh:
--   NEWT_E2E_WS=... NEWT_E2E_PYTHON=... NEWT_E2E_EXPECT=... NEWT_E2E_OUT=... nvim --headless --clean -l nvim_e2e.lua
local ws = assert(vim.env.NEWT_E2E_WS, 'NEWT_E2E_WS')
local python = vim.env.NEWT_E2E_PYTHON or 'python3'
local expect = vim.json.decode(table.concat(vim.fn.readfile(assert(vim.env.NEWT_E2E_EXPECT)), '\n'))
local out_path = assert(vim.env.NEWT_E2E_OUT, 'NEWT_E2E_OUT')
local t0 = vim.uv.hrtime()
local report = { client = 'neovim ' .. tostring(vim.version()), checks = {} }

local function write()
  local passed, failed = 0, 0
  for _, c in ipairs(report.checks) do
    if c.ok then passed = passed + 1 else failed = failed + 1 end
  end
  report.passed, report.failed = passed, failed
  report.ok = failed == 0 and passed > 0
  report.ms = math.floor((vim.uv.hrtime() - t0) / 1e6)
  vim.fn.writefile({ vim.json.encode(report) }, out_path)
end

local function check(name, fn)
  local start = vim.uv.hrtime()
  local ok, res = pcall(fn)
  local entry
  if ok then
    entry = type(res) == 'table' and res or { ok = res and true or false }
    entry.ok = entry.ok and true or false
  else
    entry = { ok = false, error = tostring(res) }
  end
  entry.name = name
  entry.ms = math.floor((vim.uv.hrtime() - start) / 1e6)
  table.insert(report.checks, entry)
  io.stdout:write(string.format('%s %s\n', entry.ok and 'PASS' or 'FAIL', name))
  write()
  return entry
end

-- the server ---------------------------------------------------------------------------------------
local status
local progress = {}
-- the shipped plugin's handlers: the newt: URI handler and the lens commands with visible results
vim.opt.rtp:append(assert(vim.env.NEWT_E2E_REPO, 'NEWT_E2E_REPO') .. '/editors/nvim')
local newt = require('newt')
newt.setup_handlers()
local notes = {}
local real_notify = vim.notify
vim.notify = function(msg, level, o)
  table.insert(notes, { msg = msg, level = level })
  return real_notify(msg, level, o)
end
vim.cmd.cd(ws)
vim.cmd.edit(ws .. '/kernels/broken.py')
local client_id = vim.lsp.start({
  name = 'newt',
  cmd = { python, '-m', 'lsp_server' },
  -- as docs/editor.md and editors/nvim say: a neutral working directory and PYTHONSAFEPATH, so the
  -- workspace's json.py / newt/ shadows (tests/e2e/workspace) are never imported
  cmd_cwd = (function() local d = vim.fn.tempname(); vim.fn.mkdir(d, 'p'); return d end)(),
  cmd_env = { PYTHONSAFEPATH = '1' },
  root_dir = ws,
  init_options = {
    trusted = true, target = 'auto', diagnosticsOn = 'type', inlayHints = { shapes = true, dtypes = true },
    logLevel = 'info',
  },
  handlers = {
    ['newt/status'] = function(_, result) status = result end,
    ['$/progress'] = function(_, result) table.insert(progress, result) end,
  },
})

local client
check('server starts and initializes', function()
  local ok = vim.wait(60000, function()
    client = vim.lsp.get_client_by_id(client_id)
    return client ~= nil and client.initialized == true
  end, 100)
  local caps = client and client.server_capabilities or {}
  local cmds = caps.executeCommandProvider and caps.executeCommandProvider.commands or {}
  return {
    ok = ok and caps.hoverProvider ~= nil and caps.codeLensProvider ~= nil and vim.tbl_contains(cmds, 'newt.compile'),
    server_info = client and client.server_info, commands = cmds,
  }
end)
if not client or not client.initialized then
  write(); os.exit(1)
end

check('newt/status: compile-only (no GPU)', function()
  vim.wait(20000, function() return status ~= nil end, 100)
  return { ok = status ~= nil and status.mode == 'compile-only' and (status.gpu == nil or status.gpu == vim.NIL), status = status }
end)

local function open(rel)
  vim.cmd.edit(ws .. '/' .. rel)
  local buf = vim.api.nvim_get_current_buf()
  if not vim.lsp.buf_is_attached(buf, client_id) then vim.lsp.buf_attach_client(buf, client_id) end
  vim.wait(10000, function() return vim.lsp.buf_is_attached(buf, client_id) end, 50)
  return buf, vim.uri_from_bufnr(buf)
end

local function request(method, params, buf, timeout)
  local res, err = client:request_sync(method, params, timeout or 60000, buf)
  if not res then error(method .. ': ' .. tostring(err)) end
  if res.err then error(method .. ': ' .. vim.inspect(res.err)) end
  return res.result
end

-- diagnostics at exact lines and codes -----------------------------------------------------------------
for rel, want in pairs(expect.diagnostics) do
  check('diagnostics ' .. rel, function()
    local buf = open(rel)
    local function newt_diags()
      return vim.tbl_filter(function(d) return d.source == 'newt' end, vim.diagnostic.get(buf))
    end
    if #want > 0 then
      vim.wait(60000, function() return #newt_diags() >= #want end, 100)
    else
      vim.wait(4000, function() return false end, 100)
    end
    local actual = {}
    for _, d in ipairs(newt_diags()) do
      local lsp = d.user_data and d.user_data.lsp or {}
      table.insert(actual, {
        line = d.lnum, character = lsp.range and lsp.range.start.character or d.col, code = tostring(d.code),
        severity = ({ ERROR = 'error', WARN = 'warning', INFO = 'information', HINT = 'hint' })[vim.diagnostic.severity[d.severity]],
        message = d.message,
      })
    end
    local missing, unexpected = {}, {}
    for _, w in ipairs(want) do
      local found = false
      for _, a in ipairs(actual) do
        if a.line == w.line and a.character == w.character and a.code == w.code and a.severity == w.severity
          and a.message:find(w.message, 1, true) then found = true end
      end
      if not found then table.insert(missing, w) end
    end
    for _, a in ipairs(actual) do
      local found = false
      for _, w in ipairs(want) do
        if a.line == w.line and a.code == w.code then found = true end
      end
      if not found then table.insert(unexpected, a) end
    end
    return { ok = #missing == 0 and #unexpected == 0, missing = missing, unexpected = unexpected, actual = actual }
  end)
end

-- hover ------------------------------------------------------------------------------------------------
local function hover_text(result)
  if not result or result == vim.NIL then return '' end
  local c = result.contents
  if type(c) == 'string' then return c end
  if c.value then return c.value end
  local parts = {}
  for _, x in ipairs(c) do table.insert(parts, type(x) == 'string' and x or x.value) end
  return table.concat(parts, '\n')
end

for _, h in ipairs(expect.hover) do
  check(string.format('hover %s:%d %s', h.file, h.line + 1, h.word), function()
    local buf, uri = open(h.file)
    local text = ''
    vim.wait(30000, function()
      text = hover_text(request('textDocument/hover', { textDocument = { uri = uri }, position = { line = h.line, character = h.character } }, buf))
      return text ~= ''
    end, 500)
    local has_shape, has_dtype = true, #h.dtype == 0
    for _, s in ipairs(h.contains) do has_shape = has_shape and text:find(s, 1, true) ~= nil end
    for _, s in ipairs(h.dtype) do has_dtype = has_dtype or text:find(s, 1, true) ~= nil end
    local offers_cuda = text:find('CUDA', 1, true) ~= nil or text:find('newt.showCuda', 1, true) ~= nil
    return { ok = has_shape and has_dtype and (not h.offersCuda or offers_cuda), text = text,
             has_shape = has_shape, has_dtype = has_dtype, offers_cuda = offers_cuda }
  end)
end

-- performance figures as you type (issue 23): the spill warning and the kernel hover ---------------------------
if expect.perf then
  local p = expect.perf
  check('performance: the spilling config of ' .. p.file .. ' is a warning at its line', function()
    local t0 = vim.uv.hrtime()
    local buf = open(p.file)
    local got
    vim.wait(300000, function()
      for _, d in ipairs(vim.diagnostic.get(buf)) do
        if tostring(d.code) == 'N100' then got = d end
      end
      return got ~= nil
    end, 200)
    return { ok = got ~= nil and got.lnum == p.spillLine and got.severity == vim.diagnostic.severity.WARN
               and got.message:find('spills registers', 1, true) ~= nil,
             line = got and got.lnum, message = got and got.message,
             seconds_after_open = (vim.uv.hrtime() - t0) / 1e9 }
  end)
  check('performance: the hover of ' .. p.kernel .. ' lists the figures and the instruction mix', function()
    local buf, uri = open(p.file)
    local text = ''
    vim.wait(120000, function()
      text = hover_text(request('textDocument/hover', { textDocument = { uri = uri },
                                                        position = { line = p.kernelLine, character = p.kernelChar } }, buf))
      return text:find('Hottest source lines', 1, true) ~= nil
    end, 1000)
    return { ok = text:find('Resources on sm_', 1, true) ~= nil and text:find('Hottest source lines', 1, true) ~= nil,
             text = text:sub(-1500) }
  end)
end

-- code lenses ------------------------------------------------------------------------------------------
local lenses_by_file = {}
for rel, wants in pairs(expect.codeLenses) do
  check('code lenses ' .. rel, function()
    local buf, uri = open(rel)
    local lenses = {}
    vim.wait(30000, function()
      lenses = request('textDocument/codeLens', { textDocument = { uri = uri } }, buf) or {}
      return #lenses > 0
    end, 500)
    local resolved = {}
    for _, l in ipairs(lenses) do
      if not l.command and client.server_capabilities.codeLensProvider.resolveProvider then
        l = request('codeLens/resolve', l, buf)
      end
      if l.command then
        table.insert(resolved, { line = l.range.start.line, title = l.command.title, command = l.command.command, arguments = l.command.arguments })
      end
    end
    lenses_by_file[rel] = resolved
    local problems = {}
    local ecp = client.server_capabilities.executeCommandProvider
    local advertised = ecp and ecp.commands or {}
    for _, w in ipairs(wants) do
      for i, cmd in ipairs(w.commands) do
        local found
        for _, l in ipairs(resolved) do
          local a2 = type(l.arguments) == 'table' and l.arguments[2] or nil
          if l.command == cmd and (l.line == w.line or (type(a2) == 'table' and a2.line == w.line)) then found = l end
        end
        if not found then
          table.insert(problems, 'no ' .. cmd .. ' lens for ' .. w.kernel)
        elseif not vim.tbl_contains(advertised, cmd) then
          table.insert(problems, cmd .. ' is not in executeCommandProvider.commands, so Neovim cannot run the lens')
        else
          if not found.title:find(w.titles[i], 1, true) then table.insert(problems, cmd .. ' titled ' .. found.title) end
          local a = found.arguments or {}
          if a[1] ~= uri or type(a[2]) ~= 'table' or a[2].line ~= w.line or a[2].character ~= w.character then
            table.insert(problems, cmd .. ' arguments ' .. vim.json.encode(a))
          end
        end
      end
    end
    return { ok = #problems == 0, problems = problems, lenses = resolved }
  end)
end

local function lens(rel, cmd)
  for _, l in ipairs(lenses_by_file[rel] or {}) do
    if l.command == cmd then return l end
  end
end

-- Compile: the lens's own command through workspace/executeCommand (what running a code lens does in Neovim)
for _, k in ipairs(expect.compile) do
  check('compile ' .. k.kernel .. ' (' .. k.file .. ') by running its code lens', function()
    local buf, uri = open(k.file)
    local l = lens(k.file, 'newt.compileKernel')
    local cmd = l and { command = l.command, arguments = l.arguments }
      or { command = 'newt.compileKernel', arguments = { uri, { line = k.line, character = k.character } } }
    local r = request('workspace/executeCommand', cmd, buf, 300000)
    return { ok = type(r) == 'table' and r.kernel == k.kernel and type(r.n_regs) == 'number' and r.n_regs > 0, result = r }
  end)
end
local c = expect.compile[1]

check('the Compile lens shows its result (registers) as a message', function()
  local _, uri = open(c.file)
  notes = {}
  vim.lsp.commands['newt.compileKernel']({ command = 'newt.compileKernel', arguments = { uri, { line = c.line, character = c.character } } },
    { bufnr = vim.uri_to_bufnr(uri), client_id = client_id })
  local got
  vim.wait(300000, function()
    for _, n in ipairs(notes) do
      if n.msg:find('registers', 1, true) then got = n; return true end
    end
    return false
  end, 100)
  return { ok = got ~= nil and got.msg:find(c.kernel, 1, true) ~= nil, message = got and got.msg, notes = notes }
end)

check('a newt: URI opens as a read-only buffer with the generated CUDA', function()
  local r = newt.last_compile
  local cuda = type(r) == 'table' and r.documents and r.documents.cuda
  if not cuda then return { ok = false, why = 'no compile result' } end
  local buf = newt.open(cuda, 'current')
  local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
  local ok = text:find('__global__', 1, true) ~= nil and vim.bo[buf].modifiable == false and vim.bo[buf].filetype == 'cuda'
  vim.cmd.bdelete({ bang = true })
  return { ok = ok, uri = cuda, filetype = vim.bo[buf].filetype, head = text:sub(1, 300) }
end)

check('no workspace module shadowing the server\'s imports was run', function()
  local ran = vim.fn.glob(ws .. '/RAN_*', false, true)
  return { ok = #ran == 0, ran = ran }
end)

local compiled
check('newt.compile returns registers and the generated documents', function()
  local buf, uri = open(c.file)
  compiled = request('workspace/executeCommand', { command = 'newt.compile', arguments = { { uri = uri, position = { line = c.line, character = c.character } } } }, buf, 300000)
  local docs = type(compiled) == 'table' and compiled.documents or {}
  return { ok = type(compiled) == 'table' and compiled.n_regs and compiled.n_regs > 0 and docs.cuda ~= nil and docs.ptx ~= nil, result = compiled }
end)

for _, spec in ipairs({ { 'cuda', 'cuda-cpp', '__global__' }, { 'ptx', 'ptx', '.entry' }, { 'sass', 'sass', 'EXIT' } }) do
  local kind, lang, needle = spec[1], spec[2], spec[3]
  check('newt.show ' .. kind .. ' + newt/virtualDocument', function()
    local buf, uri = open(c.file)
    local shown = request('workspace/executeCommand', { command = 'newt.show', arguments = { { uri = uri, position = { line = c.line, character = c.character }, kind = kind } } }, buf, 300000)
    local doc = request('newt/virtualDocument', { uri = shown.uri }, buf, 300000)
    return { ok = doc.languageId == lang and doc.text:find(needle, 1, true) ~= nil, uri = shown.uri, languageId = doc.languageId, head = doc.text:sub(1, 300), tail = doc.text:sub(-600) }
  end)
end

-- Verify through the interpreter -----------------------------------------------------------------------
for _, v in ipairs(expect.verify) do
  check('verify ' .. v.kernel .. ' (' .. v.file .. ') runs on the ' .. v.device, function()
    local buf, uri = open(v.file)
    local r = request('workspace/executeCommand', { command = 'newt.verify', arguments = { { uri = uri, position = { line = v.line, character = v.character } } } }, buf, 300000)
    return { ok = type(r) == 'table' and r.kernel == v.kernel and r.device == v.device and r.ok == true and type(r.cases) == 'table' and #r.cases > 0, result = r }
  end)
end

-- Autotune with a client-side workDoneToken: $/progress begin, a report per config, end ------------------
local a = expect.autotune
check('autotune ' .. a.kernel .. ' with $/progress', function()
  local buf, uri = open(a.file)
  local token = 'nvim-autotune-1'
  progress = {}
  local r = request('workspace/executeCommand', {
    command = 'newt.autotune', workDoneToken = token,
    arguments = { { uri = uri, position = { line = a.line, character = a.character } } },
  }, buf, 400000)
  local function kinds()
    local ks = {}
    for _, p in ipairs(progress) do
      if p.token == token and type(p.value) == 'table' then table.insert(ks, p.value.kind) end
    end
    return ks
  end
  vim.wait(3000, function() local k = kinds(); return k[#k] == 'end' end, 50)
  local ks = kinds()
  local reports, timed = 0, 0
  for _, k in ipairs(ks) do if k == 'report' then reports = reports + 1 end end
  for _, x in ipairs(type(r) == 'table' and r.results or {}) do
    if type(x.ms) == 'number' then timed = timed + 1 end
  end
  return {
    ok = type(r) == 'table' and r.kernel == a.kernel and type(r.best) == 'table' and timed == a.configs
      and ks[1] == 'begin' and ks[#ks] == 'end' and reports >= a.configs,
    result = r, progress_kinds = ks,
  }
end)

check("the plugin's server command: cmd, else python -m lsp_server, else newt-lsp on PATH", function()
  local saved_cmd, saved_python, saved_path = newt.config.cmd, newt.config.python, vim.env.PATH
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir, 'p')
  vim.fn.writefile({ '#!/bin/sh', 'exit 0' }, dir .. '/newt-lsp')
  vim.fn.setfperm(dir .. '/newt-lsp', 'rwxr-xr-x')
  local got = {}
  newt.config.cmd, newt.config.python = nil, nil
  vim.env.PATH = '/nonexistent'
  got.nothing = newt.server_cmd()
  vim.env.PATH = dir .. ':' .. saved_path
  got.on_path = newt.server_cmd()
  newt.config.python = '/x/python'
  got.python = newt.server_cmd()
  newt.config.cmd = { '/y/newt-lsp', '--log-level', 'debug' }
  got.cmd = newt.server_cmd()
  newt.config.cmd, newt.config.python, vim.env.PATH = saved_cmd, saved_python, saved_path
  return {
    ok = vim.deep_equal(got.nothing, { 'python3', '-m', 'lsp_server' }) and vim.deep_equal(got.on_path, { 'newt-lsp' })
      and vim.deep_equal(got.python, { '/x/python', '-m', 'lsp_server' })
      and vim.deep_equal(got.cmd, { '/y/newt-lsp', '--log-level', 'debug' }),
    got = got,
  }
end)

write()
vim.lsp.stop_client(client_id, true)
vim.wait(5000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 50)
os.exit(report.ok and 0 or 1)
