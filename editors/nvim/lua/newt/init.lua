-- Newt for Neovim (0.11+): the language server's configuration, the kernel commands with visible results,
-- and a handler for the server's `newt:` URIs (generated CUDA / PTX / SASS / IR, fetched through
-- `newt/virtualDocument`).
--
--   vim.opt.rtp:append('<your newt clone>/editors/nvim')
--   require('newt').setup()   -- starts `newt-lsp` (on PATH, e.g. an activated venv)
--   require('newt').setup({ cmd = { '/path/to/newt/.venv/bin/newt-lsp' } })   -- or name it
--   require('newt').setup({ python = '<a python with newt installed>' })       -- or `python -m lsp_server`
--
-- Commands: :NewtCompile, :NewtVerify, :NewtAutotune, :NewtShow [cuda|ptx|sass|ir] (the kernel at the
-- cursor); the code lenses (Compile · Verify · Autotune · Show CUDA) run the same functions.
local M = {}

M.config = {
  -- the server command: `cmd` if given, else `python -m lsp_server` with `python` if given, else `newt-lsp`
  -- when it is on PATH, else `python3 -m lsp_server` (see M.server_cmd)
  cmd = nil,
  python = nil,
  init_options = { trusted = true, target = 'auto', diagnosticsOn = 'type', inlayHints = { shapes = true, dtypes = true } },
}

local LANG = { cuda = 'cuda', ptx = 'asm', sass = 'asm', ir = 'text' }
local SHOW = { ['newt.showCuda'] = 'cuda', ['newt.showPtx'] = 'ptx', ['newt.showSass'] = 'sass', ['newt.showIr'] = 'ir' }

local function newt_client(bufnr)
  local clients = vim.lsp.get_clients({ name = 'newt', bufnr = bufnr })
  if #clients == 0 then clients = vim.lsp.get_clients({ name = 'newt' }) end
  return clients[1]
end

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO, { title = 'newt' })
end

--- The one-line summary of a newt.compile result (what VS Code's notification shows).
function M.compile_summary(r)
  local parts = { string.format('%s compiled for %s: %d registers, %d spills', r.kernel, r.target or '?',
    r.n_regs or 0, r.n_spills or 0) }
  if type(r.shared) == "number" then table.insert(parts, string.format("%d B shared", r.shared)) end
  if r.compile_ms then table.insert(parts, string.format('%.0f ms', r.compile_ms)) end
  local s = table.concat(parts, ', ')
  if r.specialization_label then s = s .. ' [' .. r.specialization_label .. ']' end
  if type(r.assumed) == 'table' and next(r.assumed) then
    local a = {}
    for k, v in pairs(r.assumed) do table.insert(a, k .. ': ' .. tostring(v)) end
    table.sort(a)
    s = s .. '; assumed ' .. table.concat(a, ', ')
  end
  return s
end

--- Runs a server command on the kernel at `pos` (0-based) of `bufnr`; `done(err, result)`.
function M.execute(command, bufnr, pos, extra, done)
  local client = newt_client(bufnr)
  if not client then
    notify('the newt language server is not running', vim.log.levels.ERROR)
    return
  end
  local arg = vim.tbl_extend('force', { uri = vim.uri_from_bufnr(bufnr), position = pos }, extra or {})
  client:request('workspace/executeCommand', { command = command, arguments = { arg } }, function(err, result)
    if err then
      notify(command:gsub('^newt%.', 'newt: ') .. ' failed: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
    if done then done(err, result) end
  end, bufnr)
end

--- Opens a `newt:` URI in a read-only buffer beside the source (`how`: 'vsplit' (default), 'split', 'current').
function M.open(uri, how)
  local buf = vim.fn.bufnr(uri)
  if buf == -1 then
    buf = vim.api.nvim_create_buf(true, false)
    pcall(vim.api.nvim_buf_set_name, buf, uri)
  end
  M.read_virtual(buf, uri)
  if (how or 'vsplit') ~= 'current' then vim.cmd(how or 'vsplit') end
  vim.api.nvim_win_set_buf(0, buf)
  return buf
end

local function cursor_pos()
  local c = vim.api.nvim_win_get_cursor(0)
  return { line = c[1] - 1, character = c[2] }
end

function M.compile(bufnr, pos, done)
  M.execute('newt.compile', bufnr or 0, pos or cursor_pos(), nil, function(err, r)
    if not err and type(r) == 'table' then
      M.last_compile = r
      notify(M.compile_summary(r) .. (r.documents and r.documents.sass and ('\nSASS: ' .. r.documents.sass) or ''))
    end
    if done then done(err, r) end
  end)
end

function M.verify(bufnr, pos, done)
  M.execute('newt.verify', bufnr or 0, pos or cursor_pos(), nil, function(err, r)
    if not err and type(r) == 'table' then
      notify(string.format('%s: %s on the %s (%d case%s)', r.kernel, r.ok and 'verified' or 'FAILED verification',
        r.device or '?', #(r.cases or {}), #(r.cases or {}) == 1 and '' or 's'),
        r.ok and vim.log.levels.INFO or vim.log.levels.ERROR)
    end
    if done then done(err, r) end
  end)
end

function M.autotune(bufnr, pos, done)
  M.execute('newt.autotune', bufnr or 0, pos or cursor_pos(), nil, function(err, r)
    if not err and type(r) == 'table' and type(r.best) == 'table' then
      notify(string.format('%s: best config %s (%s)', r.kernel, vim.inspect(r.best.config or r.best),
        r.best.ms and string.format('%.3f ms', r.best.ms) or ''))
    end
    if done then done(err, r) end
  end)
end

function M.show(kind, bufnr, pos, done)
  M.execute('newt.show', bufnr or 0, pos or cursor_pos(), { kind = kind or 'cuda' }, function(err, r)
    if not err and type(r) == 'table' and r.uri then
      vim.schedule(function() M.open(r.uri) end)
    end
    if done then done(err, r) end
  end)
end

--- Fills a `newt:` buffer from newt/virtualDocument (synchronously: a BufReadCmd must finish the buffer).
function M.read_virtual(bufnr, uri)
  local client = newt_client(nil)
  local lines, ft = { '// newt: the language server is not running' }, 'text'
  if client then
    local resp = client:request_sync('newt/virtualDocument', { uri = uri }, 300000, bufnr)
    if resp and resp.result then
      lines = vim.split(resp.result.text or '', '\n', { plain = true })
      local kind = uri:match('[?&]kind=(%w+)') or 'cuda'
      ft = LANG[kind] or 'text'
    else
      lines = { '// newt: could not generate this document: ' .. vim.inspect(resp and resp.err or 'no answer') }
    end
  end
  vim.bo[bufnr].modifiable = true
  vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
  vim.bo[bufnr].buftype = 'nofile'
  vim.bo[bufnr].bufhidden = 'hide'
  vim.bo[bufnr].swapfile = false
  vim.bo[bufnr].modifiable = false
  vim.bo[bufnr].readonly = true
  vim.bo[bufnr].filetype = ft
end

local function lens_handler(fn)
  -- code lens arguments: [uri, {line, character}]
  return function(command, ctx)
    local args = command.arguments or {}
    local bufnr = args[1] and vim.uri_to_bufnr(args[1]) or ctx.bufnr
    fn(bufnr, args[2])
  end
end

--- The language server's command line (docs/editor.md): `newt-lsp` is what `pip install` of newt puts in the
--- environment's bin folder (`./dev setup` makes `<clone>/.venv/bin/newt-lsp`).
function M.server_cmd()
  local c = M.config
  if c.cmd then return type(c.cmd) == 'string' and { c.cmd } or c.cmd end
  if c.python then return { c.python, '-m', 'lsp_server' } end
  if vim.fn.executable('newt-lsp') == 1 then return { 'newt-lsp' } end
  return { 'python3', '-m', 'lsp_server' }
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', M.config, opts or {})
  local neutral = vim.fn.stdpath('cache') .. '/newt-lsp-cwd'
  vim.fn.mkdir(neutral, 'p')
  vim.lsp.config('newt', {
    cmd = M.server_cmd(),
    -- never the workspace as the working directory, and PYTHONSAFEPATH: a workspace json.py or newt/ must
    -- not be imported when the server starts
    cmd_cwd = neutral,
    cmd_env = { PYTHONSAFEPATH = '1' },
    filetypes = { 'python' },
    root_markers = { 'pyproject.toml', '.git' },
    init_options = M.config.init_options,
  })
  vim.lsp.enable('newt')
  vim.lsp.commands['newt.compileKernel'] = lens_handler(M.compile)
  vim.lsp.commands['newt.verifyKernel'] = lens_handler(M.verify)
  vim.lsp.commands['newt.autotuneKernel'] = lens_handler(M.autotune)
  for cmd, kind in pairs(SHOW) do
    vim.lsp.commands[cmd] = lens_handler(function(b, p) M.show(kind, b, p) end)
  end
  local group = vim.api.nvim_create_augroup('newt', { clear = true })
  vim.api.nvim_create_autocmd('BufReadCmd', {
    group = group,
    pattern = { 'newt:*', '*/newt:*' },
    callback = function(ev) M.read_virtual(ev.buf, ev.match:match('newt:.*$') or ev.match) end,
  })
  vim.api.nvim_create_user_command('NewtCompile', function() M.compile(0) end, { desc = 'newt: compile the kernel at the cursor' })
  vim.api.nvim_create_user_command('NewtVerify', function() M.verify(0) end, { desc = 'newt: verify the kernel at the cursor' })
  vim.api.nvim_create_user_command('NewtAutotune', function() M.autotune(0) end, { desc = 'newt: autotune the kernel at the cursor' })
  vim.api.nvim_create_user_command('NewtShow', function(o) M.show(o.args ~= '' and o.args or 'cuda', 0) end,
    { nargs = '?', complete = function() return { 'cuda', 'ptx', 'sass', 'ir' } end, desc = 'newt: show generated code' })
end

--- Only the `newt:` handler and the commands, for a client started some other way (vim.lsp.start).
function M.setup_handlers()
  local group = vim.api.nvim_create_augroup('newt', { clear = true })
  vim.api.nvim_create_autocmd('BufReadCmd', {
    group = group, pattern = { 'newt:*', '*/newt:*' },
    callback = function(ev) M.read_virtual(ev.buf, ev.match:match('newt:.*$') or ev.match) end,
  })
  vim.lsp.commands['newt.compileKernel'] = lens_handler(M.compile)
  for cmd, kind in pairs(SHOW) do
    vim.lsp.commands[cmd] = lens_handler(function(b, p) M.show(kind, b, p) end)
  end
end

return M
