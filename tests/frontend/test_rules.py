"""Every checker rule, with the exact line and column it must report."""


def test_constexpr_required_arange(expect):
    fa = expect("""
    @newt.jit
    def k(x_ptr, n):
        offs = nl.arange(0, «n)
        nl.store(x_ptr + offs, 1.0)
    """, "N010", hint="declare n as `n: nl.constexpr`")
    d = fa.diagnostics[0]
    assert d.data.get("param") == "n"


def test_constexpr_required_block_shape(expect):
    expect("""
    @newt.jit
    def k(x_ptr, n):
        acc = nl.zeros(«(n, 16), dtype=nl.float32)
    """, "N010")


def test_constexpr_required_static_range(expect):
    expect("""
    @newt.jit
    def k(x_ptr, n):
        for i in «nl.static_range(n):
            nl.store(x_ptr + i, 1.0)
    """, "N010")


def test_power_of_two_literal(expect):
    fa = expect("""
    @newt.jit
    def k(x_ptr):
        offs = nl.arange(0, «1000)
        nl.store(x_ptr + offs, 1.0)
    """, "N011", hint="round 1000 up to 1024")
    assert fa.diagnostics[0].data["replace"] == "1024"


def test_power_of_two_zeros(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        acc = nl.zeros(«(48, 64), dtype=nl.float32)
    """, "N011", hint="round 48 up to 64")


def test_power_of_two_from_launch(expect):
    fa = expect("""
    @newt.jit
    def k(x_ptr, n, BLOCK: nl.constexpr):
        offs = nl.arange(0, «BLOCK)
        nl.store(x_ptr + offs, 1.0, mask=offs < n)

    def host(x):
        k[(1,)](x, 10, BLOCK=1000)
    """, "N011")
    d = fa.diagnostics[0]
    assert "launch at line 9" in d.context and d.data["param"] == "BLOCK"


def test_power_of_two_from_autotune_config(expect):
    fa = expect("""
    @newt.autotune(configs=[newt.Config({"BLOCK": 128}), newt.Config({"BLOCK": 96})], key=["n"])
    @newt.jit
    def k(x_ptr, n, BLOCK: nl.constexpr):
        offs = nl.arange(0, «BLOCK)
        nl.store(x_ptr + offs, 1.0, mask=offs < n)
    """, "N011")
    assert "autotune config #2" in fa.diagnostics[0].context


def test_block_too_large(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        acc = nl.zeros(«(2048, 1024), dtype=nl.float32)
    """, "N012")


def test_signedness(expect):
    expect("""
    @newt.jit
    def k(a: "i32", b: "u32", out_ptr):
        c = «a // b
        nl.store(out_ptr, c)
    """, "N020", contains="different signedness")


def test_bitwise_on_float(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr)
        y = «x & 1
    """, "N021", hint="bitcast")


def test_pointer_plus_float(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        p = «x_ptr + 1.5
    """, "N022")


def test_pointer_plus_pointer(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32", y_ptr: "*fp32"):
        p = «x_ptr + y_ptr
    """, "N022")


def test_broadcast_mismatch(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        a = nl.arange(0, 64)
        b = nl.arange(0, 128)
        c = «a + b
    """, "N030", contains="[64] and [128]")


def test_dot_rank(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp16"):
        a = nl.load(x_ptr + nl.arange(0, 64))
        c = «nl.dot(a, a)
    """, "N031", contains="2-D")


def test_dot_inner_dim(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp16"):
        a = nl.load(x_ptr + nl.arange(0, 32)[:, None] * 32 + nl.arange(0, 32)[None, :])
        b = nl.load(x_ptr + nl.arange(0, 64)[:, None] * 32 + nl.arange(0, 32)[None, :])
        c = «nl.dot(a, b)
    """, "N031", contains="inner dimensions")


def test_dot_dtype(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp16", y_ptr: "*fp32"):
        offs = nl.arange(0, 32)[:, None] * 32 + nl.arange(0, 32)[None, :]
        a = nl.load(x_ptr + offs)
        b = nl.load(y_ptr + offs)
        c = «nl.dot(a, b)
    """, "N031", contains="same dtype")


def test_dot_of_small_blocks_is_accepted():
    # Triton takes any M, N, K (the GPU lowers tiles under 16 by FMA); a dtype mismatch is still N031
    from tests.frontend.conftest import check_src
    fa, _ = check_src("""
    @newt.jit
    def k(x_ptr: "*fp16"):
        offs = nl.arange(0, 8)[:, None] * 32 + nl.arange(0, 32)[None, :]
        a = nl.load(x_ptr + offs)
        c = nl.dot(a, nl.trans(a))
    """)
    assert not fa.diagnostics, [d.format() for d in fa.diagnostics]


def test_reduction_axis(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr + nl.arange(0, 64))
        s = nl.sum(x, axis=«1)
    """, "N032", contains="out of range")


def test_if_condition_block(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr + nl.arange(0, 64))
        if «x > 0:
            nl.store(x_ptr, 1.0)
    """, "N040")


def test_while_condition_block(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr + nl.arange(0, 64))
        while «x > 0:
            x = x - 1
    """, "N040")


def test_return_value_from_launched_kernel(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr)
        return «x

    def host(x):
        k[(1,)](x)
    """, "N041")


def test_undefined_name(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        nl.store(x_ptr, «valu)
    """, "N003")


def test_unknown_nl_attribute(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        x = «nl.lod(x_ptr)
    """, "N004", hint="nl.load")


def test_wrong_arity(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        x = «nl.load()
    """, "N005")


def test_wrong_keyword(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        x = nl.load(x_ptr, «masks=None)
    """, "N005", hint="'mask'")


def test_non_jit_function_on_block(expect):
    expect("""
    def relu(x):
        return x

    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr + nl.arange(0, 16))
        y = «relu(x)
    """, "N006", hint="@newt.jit")


def test_python_min_on_block_is_a_deprecation_warning(expect):
    # Triton compiles min() on blocks (a chain of minimum) and warns that it is deprecated
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr + nl.arange(0, 16))
        y = «min(x, 0.0)
    """, "N008", severity="warning", hint="nl.minimum")


def test_program_id_axis(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        pid = nl.program_id(«3)
    """, "N044")


def test_branch_type_mismatch(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32", n):
        if n > 0:
            y = nl.zeros((16,), dtype=nl.float32)
        else:
            «y = nl.zeros((32,), dtype=nl.float32)
        nl.store(x_ptr + nl.arange(0, 16), y)
    """, "N042", contains="<16xfp32> on one branch and <32xfp32> on the other")


def test_branch_dtype_mismatch(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32", n):
        if n > 0:
            y = nl.zeros((16,), dtype=nl.float32)
        else:
            «y = nl.zeros((16,), dtype=nl.float16)
    """, "N042", contains="'y'")


def test_loop_carried_type_change(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp16", n):
        acc = 0
        for i in range(n):
            «acc += nl.load(x_ptr + i)
    """, "N042", contains="loop-carried")


def test_store_through_non_pointer(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32", n: "i32"):
        nl.store(«n + 1, 1.0)
    """, "N043")


def test_load_from_float(expect):
    expect("""
    @newt.jit
    def k(x: "fp32"):
        v = nl.load(«x)
    """, "N043")


def test_unsupported_with(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        «with open("f") as f:
            pass
    """, "N002", contains="'with'")


def test_unsupported_try(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        «try:
            pass
        except Exception:
            pass
    """, "N002", contains="'try'")


def test_unsupported_lambda(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        f = «lambda v: v
    """, "N002", contains="lambda")


def test_unsupported_comprehension(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        xs = «[i for i in range(4)]
    """, "N002", contains="comprehension")


def test_unsupported_class(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        «class A:
            pass
    """, "N002", contains="class")


def test_unsupported_global(expect):
    expect("""
    G = 1

    @newt.jit
    def k(x_ptr):
        «global G
    """, "N002", contains="'global'")


def test_possibly_undefined(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32", n):
        if n > 0:
            y = 1.0
        nl.store(x_ptr, «y)
    """, "N007")


def test_loop_over_list(expect):
    expect("""
    @newt.jit
    def k(x_ptr):
        for i in «(1, 2, 3):
            pass
    """, "N045")


def test_static_assert(expect):
    expect("""
    @newt.jit
    def k(x_ptr, BLOCK: nl.constexpr):
        «nl.static_assert(BLOCK >= 64, "BLOCK too small")

    def host(x):
        k[(1,)](x, BLOCK=32)
    """, "N050", contains="BLOCK too small")


def test_static_print_is_info(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr + nl.arange(0, 8))
        «nl.static_print("x is", x)
    """, "N051", severity="info", contains="x is <8xfp32>")


def test_launch_unknown_keyword(expect):
    expect("""
    @newt.jit
    def k(x_ptr, BLOCK: nl.constexpr):
        pass

    def host(x):
        k[(1,)](x, «BLOK=64)
    """, "N060", hint="'BLOCK'")


def test_launch_missing_argument(expect):
    expect("""
    @newt.jit
    def k(x_ptr, n, BLOCK: nl.constexpr):
        pass

    def host(x):
        «k[(1,)](x, BLOCK=64)
    """, "N060", contains="missing argument(s): n")


def test_config_unknown_key(expect):
    expect("""
    @newt.autotune(configs=[newt.Config({«"BLOCK_Z": 64})], key=[])
    @newt.jit
    def k(x_ptr, BLOCK: nl.constexpr):
        pass
    """, "N060")


def test_reshape_size(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr + nl.arange(0, 64))
        y = «nl.reshape(x, (16, 8))
    """, "N033")


def test_bitcast_width(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr)
        y = «x.to(nl.int16, bitcast=True)
    """, "N024")


def test_math_on_int(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*i32"):
        x = nl.load(x_ptr)
        y = nl.exp(«x)
    """, "N023", hint="x.to(nl.float32)")


def test_error_inside_helper_points_at_helper_line(expect):
    fa = expect("""
    @newt.jit
    def helper(x):
        return «x & 1

    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr)
        helper(x)
    """, "N021")
    assert fa.diagnostics[0].data.get("called_from") == 10


def test_error_inside_language_function_points_at_call(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        x = nl.load(x_ptr + nl.arange(0, 16))
        y = «nl.softmax(x, 3)
    """, "N032")


def test_aliases_tl(expect):
    src = """
    import newt.language as tl

    @newt.jit
    def k(x_ptr):
        offs = tl.arange(0, «100)
    """
    expect(src, "N011")


def test_generic_check_is_quiet_for_unknown_constexpr_branches():
    from tests.frontend.conftest import check_src
    fa, _ = check_src("""
    @newt.jit
    def k(x_ptr, n, MODE: nl.constexpr):
        offs = nl.arange(0, 16)
        x = nl.load(x_ptr + offs)
        if MODE == 1:
            y = x & 1
        else:
            y = x
        nl.store(x_ptr + offs, y)
    """)
    assert [d for d in fa.diagnostics if d.severity == 1] == []


def test_launch_of_kernel_with_dynamic_configs_is_not_missing_arguments():
    from tests.frontend.conftest import check_src
    fa, _ = check_src("""
    import torch

    def configs():
        if torch.cuda.is_available():
            return [newt.Config({"BLOCK": 128})]
        return [newt.Config({"BLOCK": 32})]

    @newt.autotune(configs=configs(), key=["n"])
    @newt.jit
    def k(x_ptr, n, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        nl.store(x_ptr + offs, 1.0, mask=offs < n)

    def host(x):
        k[(1,)](x, 10)
    """)
    assert [d.format() for d in fa.diagnostics] == []


def test_examples_check_clean():
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    r = subprocess.run([sys.executable, "-m", "newt", "check", os.path.join(root, "examples")],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=root), timeout=120)
    lines = r.stdout.splitlines()  # nothing but the summary line
    assert r.returncode == 0 and len(lines) == 1 and lines[0].endswith(": 0 errors, 0 warnings"), r.stdout + r.stderr


def test_block_index_with_fewer_colons_keeps_the_other_dims(expect):
    """As in Triton: ``x[None]`` of a [n] block is [1, n] (the dims not named by ':' follow); more ':' than the
    block has dims is N032, at the subscript."""
    from tests.frontend.conftest import check_src
    fa, _ = check_src("""
    @newt.jit
    def k(x_ptr, y_ptr, B: nl.constexpr):
        x = nl.load(x_ptr + nl.arange(0, B))
        row = x[None]
        nl.store(y_ptr + nl.arange(0, 1), nl.sum(row, axis=1))  # (axis 1 exists: row is [1, B])
    k[(1,)](x, y, B=16)
    """)
    assert [d.format() for d in fa.diagnostics if str(d.severity) == "error"] == []
    expect("""
    @newt.jit
    def k(x_ptr, B: nl.constexpr):
        x = nl.load(x_ptr + nl.arange(0, B))
        nl.store(x_ptr + nl.arange(0, B)[None, :], x[None])
        w = «x[None, :, :]
    k[(1,)](x, B=16)
    """, "N032", contains="too many indices: 2 ':' for a block of rank 1")
