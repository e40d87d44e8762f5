Code.require_file("../../examples/mnist_mlp.exs", __DIR__)

defmodule Nx.Vulkan.CompilerTest.Fns do
  import Nx.Defn

  defn mlp_loss(w1, b1, w2, x) do
    x |> Nx.dot(w1) |> Nx.add(b1) |> Nx.max(0) |> Nx.dot(w2) |> Nx.logsumexp(axes: [1]) |> Nx.mean()
  end

  defn mlp_grad(w1, b1, w2, x) do
    value_and_grad({w1, b1, w2}, fn {w1, b1, w2} -> mlp_loss(w1, b1, w2, x) end)
  end

  defn counted(x) do
    {x, _} =
      while {x, i = 0}, i < 3 do
        {x * 2, i + 1}
      end

    x
  end

  defn branch(x) do
    if Nx.sum(x) > 0, do: x * 2, else: x - 1
  end

  # A loop inside a branch: the branch cannot compute where it is not taken.
  defn branch_with_loop(x, n) do
    if Nx.sum(x) > 0 do
      {x, _, _} =
        while {x, i = 0, n}, i < n do
          {x * 2, i + 1, n}
        end

      x
    else
      x
    end
  end

  # Clauses in order, tuple results of mixed types (Nx casts the branches to the result's
  # type), a NaN or an infinity in a branch not taken, predicates of several types, a cond
  # in a branch and one in a device loop's body.
  defn branches(x, k) do
    {a, b} =
      cond do
        Nx.all(x > 0.5) -> {Nx.log(x), 1}
        k == 2 -> {x / 0.0, 2.5}
        Nx.any(Nx.is_nan(x)) -> {x * 0.0, -1}
        true -> {Nx.sqrt(x - 10), k}
      end

    c = if Nx.sum(x), do: Nx.as_type(k, :f32), else: if(k > 0, do: 1.0, else: -1.0)

    {d, _, _} =
      while {d = x, i = 0, k}, i < k do
        {if(Nx.sum(d) > 4, do: d - 3, else: d * 2), i + 1, k}
      end

    {a, b, c, d}
  end

  # A guard: the quotient's branch is not taken where a divisor is 0.
  defn guarded_quotient(a, b) do
    if Nx.all(b != 0), do: Nx.quotient(a, b), else: a
  end

  defn hooked_branch(x) do
    if Nx.sum(x) > 0, do: hook(x * 2, :taken), else: x
  end

  defn hooked(x) do
    x |> Nx.exp() |> hook(:seen) |> Nx.add(1)
  end

  defn hooks_everywhere(x, y) do
    a = hook(Nx.exp(x), :a)
    {b, _} = hook({Nx.add(a, y), y}, :pair)

    {b, _} =
      while {b, i = 0}, i < 3 do
        {hook(b * 2, :loop), i + 1}
      end

    hook(Nx.subtract(b, 1), fn t -> send(Process.get(:hook_test_pid), {:own, t}) end)
  end

  defn dropout(key, x) do
    {mask, _key} = Nx.Random.uniform(key, shape: Nx.shape(x))
    Nx.select(mask > 0.5, x / 0.5, 0.0)
  end

  defn dynamic(x, i) do
    x |> Nx.slice([i, 0], [2, 3]) |> then(&Nx.put_slice(x, [0, i], &1))
  end

  defn divide_ints(a, b) do
    Nx.quotient(a, b)
  end

  # Two checked ops (a quotient and a shift by tensors), an output from each, one from both and
  # one from neither.
  defn checked_ops(a, b, c) do
    q = Nx.quotient(a, b)
    {q, q + Nx.left_shift(a, c), a * 2}
  end

  defn solve_lower(m, y) do
    Nx.LinAlg.triangular_solve(m, y, lower: true)
  end

  defn divide_loop(a, n) do
    {a, _, _} =
      while {a, i = 0, n}, i < n do
        {Nx.quotient(a, i + 1), i + 1, n}
      end

    a
  end

  # A quotient in a device loop's body whose divisor reaches 0 after some iterations.
  defn countdown_divide(x, d, n) do
    {x, _, _, _} =
      while {x, d, i = 0, n}, i < n do
        {Nx.quotient(x, d) + 100, d - 1, i + 1, n}
      end

    x
  end

  # A quotient in the condition, evaluated once more than the body runs.
  defn divide_in_condition(x, n) do
    {x, _} =
      while {x, n}, Nx.quotient(100, n) > 0 do
        {x + 1, n + 10}
      end

    x
  end

  # Checks in a device loop nested in a device loop's body (failing where i == k, once the inner
  # loop runs) and in that body itself (failing where n == 7).
  defn nested_divide(x, n, k) do
    {x, _, _, _} =
      while {x, i = 0, n, k}, i < n do
        {y, _, _, _} =
          while {x, j = 0, i, k}, j < i do
            {Nx.quotient(x, i - k) + j, j + 1, i, k}
          end

        {y + Nx.quotient(n, n - 7), i + 1, n, k}
      end

    x
  end

  # Device loops: `while`s whose condition depends on the arguments.
  defn double_until(x, limit) do
    {x, i, _} =
      while {x, i = 0, limit}, Nx.sum(x) < limit do
        {x * 2, i + 1, limit}
      end

    {x, i}
  end

  # State slots that swap (`{b, a + b}`), and one returned unchanged.
  defn fib(n) do
    {_, a, b, _} =
      while {i = 0, a = 0, b = 1, n}, i < n do
        {i + 1, b, a + b, n}
      end

    {a, b}
  end

  # A single tensor as the state.
  defn triple_until(x) do
    while x, Nx.all(x < 1000) do
      x * 3
    end
  end

  # Work before, between and after two loops; a u8 slot the body sets to a constant, f64 math.
  defn around_loops(x, n) do
    y = Nx.exp(x)

    {y, _, _} =
      while {y, i = 0, n}, i < n do
        {Nx.sin(y) + 1, i + 1, n}
      end

    z = Nx.as_type(y, :f64)

    {z, j, k} =
      while {z, j = n, _k = Nx.tensor(3, type: :u8)}, j > 0 and Nx.sum(z) > -1 do
        {Nx.cos(z) * 1.5, j - 1, Nx.tensor(7, type: :u8)}
      end

    {Nx.sum(y) + Nx.as_type(Nx.sum(z), :f32), j, k}
  end

  # The state slot itself as the condition (any type: nonzero runs).
  defn count_down(x, k) do
    {x, k} =
      while {x, k}, k do
        {x + 1, k - 1}
      end

    {x, k}
  end

  # A loop inside a device loop's body whose condition depends on the outer state.
  defn nested(x, n) do
    {x, _, _} =
      while {x, i = 0, n}, i < n do
        {x, _, _} =
          while {x, j = 0, i}, j < i do
            {x + 1, j + 1, i}
          end

        {x * 2, i + 1, n}
      end

    x
  end

  # A loop whose condition depends on the arguments, inside a loop of a fixed trip count.
  defn in_unrolled(x, n) do
    {x, _, _} =
      while {x, k = 0, n}, k < 3 do
        {x, _, _} =
          while {x, i = 0, m = n + k}, i < m do
            {x * 2, i + 1, m}
          end

        {x + 1, k + 1, n}
      end

    x
  end

  # A dynamic slice and a put_slice with tensor starts computed from the loop counter (some
  # negative or past the end: they clamp), of s32, u8 and s16.
  defn slide(t, acc, n) do
    {_, acc, _, _} =
      while {t, acc, i = 0, n}, i < n do
        {acc, i} = slide_step(t, acc, i)
        {t, acc, i, n}
      end

    acc
  end

  defn slide_step(t, acc, i) do
    row = Nx.remainder(i * 5, 37) - 2
    col = Nx.remainder(i * 3, 29) |> Nx.as_type(:u8)
    piece = Nx.slice(t, [row, col], [4, 8])
    {Nx.put_slice(acc, [Nx.as_type(row + 1, :s16), col], piece + 1.0), i + 1}
  end

  # A state read by the merged kernel that updates it (the multiply and the gated copy of x).
  defn scale_loop(x, n) do
    {x, _, _} =
      while {x, i = 0, n}, i < n do
        {x * Nx.as_type(i + 1, :f32) - 0.25, i + 1, n}
      end

    x
  end

  # A u8 state computed by a narrowing cast: its words cannot be copied from the kernel's result.
  defn narrow_loop(b, n) do
    {b, _, _} =
      while {b, i = 0, n}, i < n do
        {Nx.as_type(Nx.as_type(b, :s32) * 3 + 1, :u8), i + 1, n}
      end

    b
  end

  # Starts as arguments, of 1 to 8 bytes (an 8-byte one past 32 bits, or negative, clamps).
  defn slide_wide(t, acc, a, b, c) do
    piece = Nx.slice(t, [a, b, c], [2, 3, 4])
    Nx.put_slice(acc, [c, a, b], Nx.multiply(piece, 2.0))
  end

  defn hooked_loop(x, n) do
    {x, _, _} =
      while {x, i = 0, n}, i < n do
        {hook(x * 2, :step), i + 1, n}
      end

    x
  end
end

defmodule Nx.Vulkan.CompilerTest do
  # Not async: changes the batch cap and reads global counters.
  use Nx.Vulkan.DeviceCase, async: false
  alias Nx.Vulkan.CompilerTest.Fns

  setup :keep_batch_max

  def forward(event, measurements, metadata, {parent, ref}),
    do: send(parent, {ref, event, measurements, metadata})

  # Whether element-wise chains fuse (f32 computed in f64 or in f32, as the device's precision
  # policy has it: fuse.rs); NXV_FUSE=0 leaves programs unfused.
  defp fuses?, do: System.get_env("NXV_FUSE") != "0"

  defp bits(container) do
    [container]
    |> Nx.Defn.Composite.flatten_list()
    |> Enum.map(&{&1.shape, &1.type, Nx.to_binary(&1)})
  end

  # The compiled function against the Evaluator on the same device, on each list of arguments,
  # bit for bit; every result a device tensor.
  defp assert_same(fun, args_list) do
    compiled = Nx.Defn.jit(fun, compiler: Nx.Vulkan)

    for args <- args_list do
      expected = apply(Nx.Defn.jit(fun), args)
      actual = apply(compiled, args)

      for t <- Nx.Defn.Composite.flatten_list([actual]),
          do: assert(%Nx.Vulkan.Backend{} = t.data)

      assert bits(actual) == bits(expected)
    end
  end

  # `x` ({_, _, n} with n >= 4) with a NaN carrying a payload, -inf, +inf and -0.0 put in a
  # row of its last axis at `start`.
  defp with_specials(x, start) do
    specials =
      <<0x7FC01234::32-little, 0xFF800000::32-little, 0x7F800000::32-little, 0x80000000::32-little>>

    Nx.put_slice(x, start, Nx.from_binary(specials, :f32) |> Nx.reshape({1, 1, 4}))
  end

  # A call's result as bits, or the exception it raised (kind and message), to compare a
  # compiled function's outcome with the BinaryBackend's.
  defp outcome(fun) do
    {:ok, fun.() |> Nx.to_binary()}
  rescue
    e -> {:raised, e.__struct__, Exception.message(e)}
  end

  defp census_delta(fun) do
    before = Nx.Vulkan.compiler_census()
    result = fun.()
    now = Nx.Vulkan.compiler_census()

    evaluator =
      Map.new(now.evaluator, fn {k, v} -> {k, v - Map.get(before.evaluator, k, 0)} end)
      |> Map.reject(fn {_, v} -> v == 0 end)

    {result,
     %{
       programs: now.programs - before.programs,
       replays: now.replays - before.replays,
       evaluator: evaluator
     }}
  end

  describe "programs" do
    test "element-wise chains, broadcasts, reductions and casts replay bit for bit" do
      f = fn x, y ->
        z = x |> Nx.exp() |> Nx.add(y) |> Nx.multiply(2.5)

        {Nx.sum(z, axes: [1]), Nx.as_type(z, :f16), Nx.argmax(z, axis: 0),
         Nx.cumulative_sum(x, axis: 1)}
      end

      args =
        for seed <- [1, 2, 3],
            do: [random({33, 17}, :f32, 2.0, seed), random({17}, :f32, 2.0, seed + 10)]

      {_, delta} = census_delta(fn -> assert_same(f, args) end)
      assert delta.programs == 1
      assert delta.replays == 3
      assert delta.evaluator == %{}
    end

    test "the MLP's value and gradient, conv, sort, gather, window and layout ops" do
      mlp =
        for seed <- [4, 5],
            do: [random({20, 16}, :f32, 1.0, seed), random({16}), random({16, 5}), random({8, 20})]

      assert_same(&Fns.mlp_grad/4, mlp)

      layout = fn x ->
        {Nx.transpose(x), Nx.reverse(x, axes: [0]), Nx.pad(x, 0.0, [{1, 2, 0}, {0, 1, 1}]),
         Nx.concatenate([x, Nx.negate(x)], axis: 1), Nx.sort(x, axis: 1), Nx.argsort(x, axis: 0),
         Nx.window_max(x, {2, 2}), Nx.take(x, Nx.tensor([3, 0, 1]), axis: 0),
         Nx.reshape(x, {4, 10}), Nx.slice(x, [1, 2], [3, 4]), Nx.clip(x, -1.0, 1.0)}
      end

      assert_same(layout, for(seed <- [6, 7], do: [random({8, 5}, :f32, 3.0, seed)]))

      conv = fn x, k -> Nx.conv(x, k, padding: :same) end

      assert_same(
        conv,
        for(
          seed <- [8, 9],
          do: [random({2, 3, 9, 9}, :f32, 1.0, seed), random({4, 3, 3, 3}, :f32, 1.0, seed + 1)]
        )
      )
    end

    test "every dtype, integer math and dynamic slices with tensor starts" do
      for type <- [:u8, :s16, :s32, :s64, :f16, :bf16, :f64, :c64] do
        f = fn x -> {Nx.add(x, x), Nx.multiply(x, 3), Nx.sum(x, axes: [0]), Nx.reverse(x)} end
        args = for k <- [1, 2], do: [Nx.iota({6, 4}, type: type) |> Nx.add(k)]
        assert_same(f, args)
      end

      assert_same(
        &Fns.dynamic/2,
        for(i <- [0, 1, 5], do: [Nx.iota({6, 6}, type: :f32), Nx.tensor(i)])
      )
    end

    test "fused element-wise chains: strided and broadcast operands, f64, results used elsewhere" do
      f = fn x, y ->
        a = x |> Nx.transpose() |> Nx.add(y) |> Nx.exp() |> Nx.multiply(y)
        b = Nx.subtract(a, 1.0) |> Nx.max(Nx.transpose(x)) |> Nx.divide(3.0)
        {a, Nx.sum(b, axes: [0]), Nx.log(Nx.abs(b))}
      end

      # f32 chains fuse (computed in f64 or in f32, as the device's policy says); f64 chains stay
      # unfused.
      for type <- [:f32, :f64] do
        args =
          for seed <- [11, 12],
              do: [random({6, 9}, type, 2.0, seed), random({6}, type, 1.0, seed + 1)]

        assert_same(f, args)
        assert %{fused_kernels: kernels} = Nx.Vulkan.program_info(f, hd(args))
        assert kernels >= 1 == (type == :f32 and fuses?())
      end
    end

    test "fused comparisons and selects: NaNs, signed zeros, integer values selected bit for bit" do
      # A quiet NaN with a payload, a negative NaN, -0.0, infinities.
      specials =
        <<0x7FC01234::32-little, 0xFFC00000::32-little, 0x80000000::32-little,
          0x7F800000::32-little, 0xFF800000::32-little, 0x3F800000::32-little>>

      x =
        Nx.from_binary(specials, :f32)
        |> Nx.tile([4])
        |> Nx.add(Nx.iota({24}, type: :f32) |> Nx.subtract(12) |> Nx.multiply(0.0))

      y = Nx.iota({24}, type: :f32) |> Nx.subtract(7) |> Nx.divide(3)
      ints = Nx.iota({24}, type: :s32) |> Nx.multiply(-123_457)

      f = fn x, y, ints ->
        mask = Nx.greater(x, y)
        picked = Nx.select(mask, Nx.multiply(x, y), Nx.negate(y)) |> Nx.add(1.0)

        {picked, Nx.select(Nx.less_equal(y, 0.5), ints, Nx.negate(ints)), Nx.not_equal(x, x),
         Nx.select(mask, x, y)}
      end

      assert_same(f, [[x, y, ints], [y, x, ints]])
      assert %{fused_kernels: kernels} = Nx.Vulkan.program_info(f, [x, y, ints])
      assert kernels >= 1 == fuses?()
    end

    test "32-bit integer chains fuse with their narrowing casts: wrapping, Nx's quotient and remainder, shifts" do
      edges = [
        0,
        1,
        -1,
        7,
        -7,
        255,
        256,
        -129,
        32_767,
        -32_769,
        65_535,
        2_147_483_647,
        -2_147_483_648
      ]

      # (Divisors and shift counts are constants: by a tensor they carry deferred checks,
      # which keep a function with the Evaluator. A negative constant makes u32 math s64.)
      f = fn q ->
        fn x, y ->
          a = x |> Nx.multiply(3) |> Nx.add(1000) |> Nx.remainder(37)
          b = x |> Nx.subtract(70_000) |> Nx.quotient(q) |> Nx.bitwise_xor(y)
          c = Nx.left_shift(x, 5) |> Nx.right_shift(3) |> Nx.multiply(y)

          {Nx.as_type(a, :u8), Nx.as_type(b, :s16), Nx.as_type(c, :s8), Nx.greater(a, b),
           Nx.as_type(Nx.add(c, a), :u16)}
        end
      end

      for {type, q} <- [s32: -7, u32: 7] do
        f = f.(q)
        x = Nx.tensor(edges, type: :s32) |> Nx.as_type(type)
        y = Nx.tensor([3, -5, 7, 2, -1, 9, 11, -13, 4, 6, 5, 3, -3], type: :s32) |> Nx.as_type(type)
        assert_same(f, [[x, y], [y, x |> Nx.bitwise_or(1)]])

        if fuses?() do
          info = Nx.Vulkan.program_info(f, [x, y])
          assert info.fused_kernels >= 1
          refute "convert" in info.kernels
          refute Enum.any?(info.kernels, &String.starts_with?(&1, "binary_"))
        end
      end
    end

    test "fused casts, materialized broadcasts and transposes, chains interleaved with other work" do
      x = random({6, 9}, :f32, 2.0, 21)
      y = random({6, 9}, :f32, 2.0, 22)
      edges = [-2_147_483_648, 2_147_483_647, 16_777_217, -16_777_219, 0, -1, 123_456_789]

      ints =
        Nx.tensor(edges, type: :s32) |> Nx.tile([8]) |> Nx.slice([0], [54]) |> Nx.reshape({6, 9})

      bytes = Nx.iota({6, 9}, type: :u8) |> Nx.multiply(37)
      shorts = Nx.iota({6, 9}, type: :s16) |> Nx.multiply(-1201)

      f = fn x, y, ints, bytes, shorts ->
        mask = Nx.greater(x, y)
        # Captured between the comparison and the cast of its predicate.
        rows = Nx.sum(x, axes: [1], keep_axes: true)
        weighted = mask |> Nx.as_type(:f32) |> Nx.multiply(y)
        # A select's integer bits, cast in a register; casts of integer inputs.
        picked = Nx.select(mask, ints, Nx.negate(ints)) |> Nx.as_type(:f32) |> Nx.add(0.5)
        widened = Nx.add(Nx.as_type(bytes, :f32), Nx.as_type(shorts, :f32)) |> Nx.divide(7.0)
        # A broadcast and a transpose materialized by copies, feeding chains.
        centred = rows |> Nx.broadcast({6, 9}) |> Nx.subtract(x) |> Nx.exp()
        turned = x |> Nx.transpose() |> Nx.multiply(3.0) |> Nx.transpose() |> Nx.add(weighted)
        {weighted, picked, widened, centred, turned, Nx.as_type(mask, :u32)}
      end

      args = [x, y, ints, bytes, shorts]
      assert_same(f, [args, [y, x, Nx.negate(ints), bytes, shorts]])
      info = Nx.Vulkan.program_info(f, args)

      if fuses?() do
        # Every cast and every copy above joined a fused kernel (the u8 -> u32 cast of the
        # predicate too, with its result held as a uint).
        refute "convert" in info.kernels, inspect(info.kernels)
        refute "copy_b4" in info.kernels, inspect(info.kernels)
        assert info.fused_ops >= 16
      end
    end

    test "reductions with element-wise epilogues: sums, products, max and min, NaN and infinities" do
      # 12 x 40 x 5, a few special values spread through it; every reduction folds <= 64 elements
      # (serially on every device).
      x = with_specials(random({12, 40, 5}, :f32, 3.0, 41), [3, 7, 0])

      y = random({12, 5}, :f32, 1.0, 42)

      f = fn x, y ->
        sums = Nx.sum(x, axes: [1]) |> Nx.abs() |> Nx.log1p() |> Nx.multiply(y)
        mean = Nx.mean(x, axes: [1]) |> Nx.subtract(y)
        maxes = Nx.reduce_max(x, axes: [1]) |> Nx.exp() |> Nx.min(10.0)
        mins = Nx.reduce_min(x, axes: [1]) |> Nx.greater(y)
        products = x |> Nx.slice([0, 0, 0], [12, 6, 5]) |> Nx.product(axes: [1]) |> Nx.tanh()
        # Over the first and last axes: a strided reduction layout.
        outer = Nx.sum(x, axes: [0, 2]) |> Nx.sqrt() |> Nx.negate()
        {sums, mean, maxes, mins, products, outer}
      end

      args = [[x, y], [Nx.negate(x), Nx.multiply(y, 3.0)]]
      assert_same(f, args)
      info = Nx.Vulkan.program_info(f, hd(args))

      if fuses?() do
        # Each reduction's epilogue joined it: no reduction or element-wise kernel of its own.
        kinds = Enum.frequencies(info.kernels)
        refute Map.has_key?(kinds, "reduce_serial_f32p"), inspect(info.kernels)
        refute Map.has_key?(kinds, "unary_f32p"), inspect(info.kernels)
        assert kinds["fused_elementwise"] >= 6
      end
    end

    test "reductions with element-wise prologues: the input computed in the reduction's loop" do
      x = with_specials(random({12, 40, 5}, :f32, 3.0, 51), [2, 9, 1])

      b = random({5}, :f32, 1.0, 52)
      c = random({12, 1, 5}, :f32, 1.0, 53)

      f = fn x, b, c ->
        # A stable log-sum-exp: the shifted logits are read by the max's prologue, written by it
        # (other kernels read them), and exp'd in the sum's prologue.
        logits = Nx.add(x, b)
        shifted = Nx.subtract(logits, Nx.reduce_max(logits, axes: [1], keep_axes: true))
        lse = shifted |> Nx.exp() |> Nx.sum(axes: [1], keep_axes: true) |> Nx.log()
        # Over the first and last axes (a strided layout visiting each element once), with a
        # broadcast operand in the prologue.
        outer = x |> Nx.multiply(c) |> Nx.abs() |> Nx.sum(axes: [0, 2])
        # A product and a min of prologues with NaN and infinities in them.
        products = x |> Nx.multiply(0.5) |> Nx.tanh() |> Nx.product(axes: [2])
        mins = x |> Nx.subtract(c) |> Nx.reduce_min(axes: [0])
        # A slice reduced: its layout skips elements, so its prologue is not fused.
        part = x |> Nx.slice([0, 0, 0], [12, 6, 5]) |> Nx.multiply(2.0) |> Nx.sum(axes: [1])
        {Nx.subtract(shifted, lse), outer, products, mins, part, logits}
      end

      args = [[x, b, c], [Nx.negate(x), Nx.multiply(b, 3.0), Nx.negate(c)]]
      assert_same(f, args)
      info = Nx.Vulkan.program_info(f, hd(args))

      # Prologues fuse on CPU devices only (fuse.rs says why).
      if fuses?() and Nx.Vulkan.Device.class() == :software do
        # Every element-wise op joined a reduction (before or after it) or the final subtract,
        # in kernels of their own or merged into one of small stages.
        kinds = Enum.frequencies(info.kernels)

        assert (Map.keys(kinds) -- ["merged_stages"]) in [["fused_elementwise"], []],
               inspect(info.kernels)

        assert info.fused_ops >= 17
      end
    end

    test "small stages of consecutive levels run in one workgroup's kernel, bit for bit" do
      # A loss and its gradient over a batch's classes: a dozen small commands in a row (max,
      # shift, exp, sum, log, the labels' product, the row sums, the mean and the backward
      # chain), where each dispatch would cost more than its work. A cumulative sum (pads whose
      # fill and interior are separate writes of one buffer) and a chain over 64 x 64 elements
      # (past the size a stage may have) ride along.
      f = fn logits, labels, v, big ->
        shifted = Nx.subtract(logits, Nx.reduce_max(logits, axes: [1], keep_axes: true))
        sums = shifted |> Nx.exp() |> Nx.sum(axes: [1], keep_axes: true)
        log_probs = Nx.subtract(shifted, Nx.log(sums))
        loss = labels |> Nx.multiply(log_probs) |> Nx.sum(axes: [1]) |> Nx.mean() |> Nx.negate()
        grad = log_probs |> Nx.exp() |> Nx.subtract(labels) |> Nx.divide(32)
        sin_big = big |> Nx.sin() |> Nx.multiply(big)
        {loss, grad, Nx.sum(grad, axes: [0]), Nx.cumulative_sum(v), sin_big}
      end

      labels = Nx.iota({32, 10}, axis: 1) |> Nx.equal(Nx.iota({32, 1}) |> Nx.remainder(10))
      labels = Nx.as_type(labels, :f32)

      args =
        for seed <- [61, 62] do
          logits = with_specials(random({1, 32, 10}, :f32, 6.0, seed), [0, 3, 2])
          [Nx.reshape(logits, {32, 10}), labels, random({7}, :f32, 3.0, seed), random({64, 64})]
        end

      assert_same(f, args)
      info = Nx.Vulkan.program_info(f, hd(args))

      if fuses?() and System.get_env("NXV_MERGE") != "0" do
        assert info.merged_kernels >= 1, inspect(info)
        assert info.merged_commands >= 5, inspect(info)
        # The 64 x 64 chain keeps its own kernel.
        assert "fused_elementwise" in info.kernels, inspect(info.kernels)
      else
        assert info.merged_kernels == 0
      end
    end

    test "integer and float stages share a merged kernel, each in its own section, bit for bit" do
      # s32 arithmetic (wrapping multiply, Nx's remainder, shifts) beside f32 math: an s32 select
      # by an f32 comparison (the values' bits held as floats), a cast between them, a u32 chain
      # and its sum, small enough to merge; NaN and infinities in the floats.
      f = fn a, b, x ->
        s = a |> Nx.multiply(40_503) |> Nx.remainder(977) |> Nx.right_shift(1)
        picked = Nx.select(Nx.greater(x, 0.25), s, Nx.multiply(b, -3))
        y = picked |> Nx.as_type(:f32) |> Nx.multiply(x) |> Nx.exp()
        u = a |> Nx.as_type(:u32) |> Nx.multiply(2_654_435_761) |> Nx.bitwise_xor(7)
        {picked, y, Nx.sum(u), Nx.add(picked, Nx.as_type(u, :s32))}
      end

      args =
        for seed <- [71, 72] do
          a = Nx.iota({256}, type: :s32) |> Nx.multiply(seed * 1_000_003) |> Nx.subtract(9_000_000)
          b = Nx.iota({256}, type: :s32) |> Nx.remainder(seed)
          x = with_specials(random({1, 16, 16}, :f32, 2.0, seed), [0, 3, 5]) |> Nx.reshape({256})
          [a, b, x]
        end

      assert_same(f, args)

      if fuses?() and System.get_env("NXV_MERGE") != "0" do
        info = Nx.Vulkan.program_info(f, hd(args))
        # (Devices of other classes sum with reduce.comp's tree, a kernel of its own.)
        assert info.merged_kernels == 1, inspect(info)

        assert Enum.all?(info.kernels, &(&1 == "merged_stages" or &1 =~ ~r/^reduce_/)),
               inspect(info.kernels)
      end
    end

    test "merged stages share what later stages read, within the shared-memory budget, bit for bit" do
      # Stages over 64 x 32 elements (2048, the most a merged stage has) and row sums, whose
      # results later stages read: five of 8 KiB each (a, b, b * b, c, d), past the 32 KiB of
      # shared copies a merged kernel keeps, so later stages read some from shared copies and
      # the rest (c and d on GPUs) from the buffers.
      rows = &Nx.sum(&1, axes: [1], keep_axes: true)

      f = fn x ->
        a = Nx.exp(x)
        b = Nx.divide(a, rows.(a))
        c = b |> Nx.multiply(b) |> rows.() |> Nx.subtract(b) |> Nx.add(a)
        d = c |> Nx.multiply(rows.(c)) |> Nx.subtract(b) |> Nx.add(a)
        {Nx.add(Nx.divide(d, rows.(d)), c), rows.(d), b}
      end

      args = for seed <- [63, 64], do: [random({64, 32}, :f32, 3.0, seed)]
      assert_same(f, args)
      info = Nx.Vulkan.program_info(f, hd(args))

      if fuses?() and System.get_env("NXV_MERGE") != "0" do
        assert info.merged_kernels >= 1, inspect(info)
        assert info.merged_shared >= 2, inspect(info)
      else
        assert info.merged_shared == 0
      end
    end

    test "counts of maxima (the gradient of reduce_max, ties included) and integer sums fuse" do
      # Ties: rows with their max twice or three times, and a row of equal values.
      x =
        Nx.tensor([
          [1.0, 3.0, 3.0, -1.0, 0.5],
          [2.0, 2.0, 2.0, 2.0, 2.0],
          [-4.0, 7.0, 7.0, 7.0, 1.0],
          [0.0, -0.0, -1.0, -2.0, -3.0]
        ])
        |> Nx.tile([8, 3])

      ints = Nx.iota({32, 15}, type: :s32) |> Nx.multiply(536_870_911)

      f = fn x, ints ->
        grad = Nx.Defn.grad(x, fn x -> x |> Nx.reduce_max(axes: [1]) |> Nx.sum() end)
        # A comparison counted in u32; an s32 sum of a select that wraps past 2^31.
        counts = x |> Nx.greater(0.5) |> Nx.sum(axes: [0])
        wrapped = Nx.select(Nx.greater(x, 0), ints, Nx.negate(ints)) |> Nx.sum(axes: [1])
        {grad, counts, wrapped, Nx.as_type(wrapped, :f32)}
      end

      args = [[x, ints], [Nx.negate(x), Nx.add(ints, 7)]]
      assert_same(f, args)
      info = Nx.Vulkan.program_info(f, hd(args))

      if fuses?() and Nx.Vulkan.Device.class() == :software do
        # The max itself reads an argument: a reduction of its own; the integer sums joined
        # their prologues and epilogues.
        refute "reduce_serial_u32" in info.kernels or "reduce_serial_s32" in info.kernels,
               inspect(info.kernels)

        refute "convert" in info.kernels, inspect(info.kernels)
      end
    end

    # 2^23 + 8 outputs (64 MiB inputs): at 2^24 the program would keep more than a quarter of
    # lavapipe's memory budget and run under the Evaluator, and 2^24 outputs of a reduction need
    # more than its 128 MiB binding holds.
    test "a reduction epilogue, a cast and a broadcast copy over 2^23 outputs" do
      rows = 2 ** 23 + 8
      x = Nx.iota({rows, 2}, type: :f32) |> Nx.divide(rows)
      ints = Nx.iota({rows}, type: :s32) |> Nx.remainder(1001)

      f = fn x, ints ->
        sums = Nx.sum(x, axes: [1]) |> Nx.multiply(0.5) |> Nx.subtract(Nx.as_type(ints, :f32))
        spread = Nx.reduce_max(x, axes: [1]) |> Nx.broadcast({2, rows}) |> Nx.add(1.0)
        {sums, spread}
      end

      assert_same(f, [[x, ints]])
      assert %{kernels: kernels} = info = Nx.Vulkan.program_info(f, [x, ints])

      if fuses?() do
        # The sum with its epilogue and cast; the broadcast copy with its add; the max, read
        # through a broadcast, on its own.
        max = if Nx.Vulkan.stats().precise_f32, do: "reduce_serial_f32p", else: "reduce_serial_f32"
        assert Enum.frequencies(kernels) == %{"fused_elementwise" => 2, max => 1}, inspect(info)

        assert info.fused_ops == 6
      end
    end

    # A dot whose result only a transpose reads becomes the dot of the swapped, transposed
    # operands writing the transpose's result (peephole.rs): the same sums, one dispatch less.
    # The second shape lines up in 16-byte vectors: on CPU devices its 4-byte GEMMs take
    # gemm_rows4.comp, whose layout the fold swaps with the operands.
    test "a transposed dot result folds into the GEMM, bit for bit" do
      for {m, k, n} <- [{37, 70, 45}, {36, 72, 44}], type <- [:f32, :s32, :f64] do
        a = random({m, k}, :f32, 2.0, 41) |> Nx.as_type(type)
        b = random({k, n}, :f32, 2.0, 42) |> Nx.as_type(type)
        at = random({k, m}, :f32, 2.0, 43) |> Nx.as_type(type)

        folded = fn a, b, at ->
          {Nx.dot(a, b) |> Nx.transpose(), Nx.dot(at, [0], b, [0]) |> Nx.transpose()}
        end

        assert_same(folded, [[a, b, at]])
        info = Nx.Vulkan.program_info(folded, [a, b, at])
        refute Enum.any?(info.kernels, &String.starts_with?(&1, "copy_")), inspect(info)
        assert info.dispatches == 2
        assert info.folded_transposes == 2

        if Nx.Vulkan.Device.class() == :software do
          vector? = m == 36 and type != :f64

          assert Enum.all?(info.kernels, &String.starts_with?(&1, "gemm_rows4_")) == vector?,
                 inspect(info)
        end

        # Read elsewhere too (or returned), the product stays and the copy with it.
        kept = fn a, b -> {Nx.dot(a, b) |> Nx.transpose(), Nx.dot(a, b) |> Nx.sum()} end

        shared = fn a, b ->
          p = Nx.dot(a, b)
          {Nx.transpose(p), p}
        end

        assert_same(kept, [[a, b]])
        assert_same(shared, [[a, b]])

        assert Enum.any?(
                 Nx.Vulkan.program_info(shared, [a, b]).kernels,
                 &String.starts_with?(&1, "copy_")
               )
      end
    end

    test "GEMM epilogues: bias, activations and masks on each result as the GEMM stores it" do
      # Each shape takes another GEMM kernel (on GPUs: 16x16 tiles, 8x8 in K slices, register
      # blocks; on lavapipe: rows and rows of four), each layout another loop.
      dense = fn x, w, b, m ->
        y = Nx.dot(x, w) |> Nx.add(b)
        h = Nx.max(y, 0)

        {h, Nx.sigmoid(y) |> Nx.multiply(m),
         Nx.tanh(Nx.dot(x, w)) |> then(&Nx.select(Nx.greater(m, 0.5), &1, y))}
      end

      # The product read elsewhere too: the epilogue writes it beside its own results.
      shared = fn x, w, b ->
        p = Nx.dot(x, w)
        {Nx.exp(p |> Nx.subtract(b)), Nx.sum(p, axes: [0])}
      end

      # The gradient of a relu layer: the backward GEMM's result masked where h > 0.
      backward = fn g, w, h -> Nx.dot(g, [1], w, [1]) |> Nx.multiply(Nx.greater(h, 0)) end

      for {m, k, n} <- [{32, 784, 128}, {33, 70, 45}, {36, 72, 44}, {256, 64, 260}, {2, 5, 1}] do
        x = random({m, k}, :f32, 1.0, 51)
        w = random({k, n}, :f32, 0.1, 52)
        b = random({n}, :f32, 1.0, 53)
        mask = random({m, n}, :f32, 1.0, 54) |> Nx.abs()

        assert_same(dense, [
          [x, w, b, mask],
          [with_specials(Nx.reshape(x, {1, m, k}), [0, 0, 0]) |> Nx.reshape({m, k}), w, b, mask]
        ])

        assert_same(shared, [[x, w, b]])
        g = random({m, n}, :f32, 1.0, 55)
        h = random({m, k}, :f32, 1.0, 56)
        assert_same(backward, [[g, w, h]])

        if fuses?() do
          for {name, f, args} <- [
                {:dense, dense, [x, w, b, mask]},
                {:shared, shared, [x, w, b]},
                {:backward, backward, [g, w, h]}
              ] do
            # On GPUs a GEMM over K >= 256 with few tiles may split K (partial products, then
            # their sum, ops/matmul.rs k_splits): its ops then fuse after the sum.
            info = Nx.Vulkan.program_info(f, args)
            split? = name == :backward and n >= 256

            assert "fused_gemm" in info.kernels or split?, inspect({name, {m, k, n}, info})

            refute Enum.any?(info.kernels, &String.starts_with?(&1, "gemm_")) and not split?,
                   inspect({name, info})
          end
        end
      end

      # A conv layer: bias along the feature axis, relu (on GPUs the implicit-GEMM conv's
      # epilogue; on lavapipe the im2col GEMM's result is transposed first).
      conv = fn x, k, b ->
        Nx.conv(x, k, padding: :same, strides: [1, 2])
        |> Nx.add(Nx.reshape(b, {1, :auto, 1, 1}))
        |> Nx.max(0)
      end

      assert_same(conv, [
        [random({2, 8, 9, 11}, :f32, 1.0, 61), random({24, 8, 3, 3}, :f32, 1.0, 62), random({24})]
      ])

      # f64 and integer GEMMs keep their own kernels (the epilogue computes f32 ops in f64).
      for type <- [:f64, :s32] do
        x = random({9, 7}, :f32, 4.0, 57) |> Nx.as_type(type)
        w = random({7, 5}, :f32, 4.0, 58) |> Nx.as_type(type)
        f = fn x, w -> Nx.dot(x, w) |> Nx.add(1) |> Nx.multiply(3) end
        assert_same(f, [[x, w]])
        refute "fused_gemm" in Nx.Vulkan.program_info(f, [x, w]).kernels
      end
    end

    test "no multiply-add contracts across ops: a product rounds before the op that adds it" do
      # One kernel per op rounds each product to f32 before the next op adds it. Were a fused
      # kernel's multiply and the next op's add contracted into an fma (one rounding), its results
      # would differ in these elements: the check below shows that they would, in many of them.
      x = random({48, 37}, :f32, 1.0, 81)
      y = random({48, 37}, :f32, 1.0, 82)
      z = random({48, 37}, :f32, 1.0, 83)

      chain = fn x, y, z ->
        p = Nx.multiply(x, y)
        {Nx.add(p, z), p |> Nx.subtract(z) |> Nx.multiply(z) |> Nx.add(x) |> Nx.exp()}
      end

      # A GEMM over K = 1 (each result one product) and the add of its epilogue.
      outer = fn a, b, c -> Nx.dot(a, b) |> Nx.add(c) end
      # Products summed (on CPU devices the product is the reduction's prologue).
      dot_rows = fn x, y -> Nx.multiply(x, y) |> Nx.sum(axes: [1]) end
      a = random({48, 1}, :f32, 1.0, 84)
      b = random({1, 37}, :f32, 1.0, 85)

      assert_same(chain, [[x, y, z]])
      assert_same(outer, [[a, b, z]])
      assert_same(dot_rows, [[x, y], [z, x]])

      if fuses?() do
        assert Nx.Vulkan.program_info(chain, [x, y, z]).fused_kernels >= 1
        assert "fused_gemm" in Nx.Vulkan.program_info(outer, [a, b, z]).kernels
      end

      # The check has teeth: x * y + z with one rounding (exact in f64, then rounded to f32)
      # differs from the two kernels' results in some elements.
      fma =
        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          [x64, y64, z64] =
            for t <- [x, y, z], do: Nx.as_type(Nx.backend_copy(t, Nx.BinaryBackend), :f64)

          Nx.multiply(x64, y64) |> Nx.add(z64) |> Nx.as_type(:f32)
        end)

      {two, _} = Nx.Defn.jit(chain).(x, y, z)

      differ =
        Nx.not_equal(Nx.backend_copy(two, Nx.BinaryBackend), fma) |> Nx.sum() |> Nx.to_number()

      assert differ > 0
    end

    test "a GEMM epilogue past 2^24 results (a 2-D grid of workgroups), bit for bit" do
      # 4100 x 4097 results: the GEMM's workgroups span a 2-D grid, and its epilogue stores
      # each result at the index the GEMM computes for it.
      {m, k, n} = {4100, 3, 4097}
      assert m * n > 2 ** 24
      x = random({m, k}, :f32, 1.0, 71)
      w = random({k, n}, :f32, 1.0, 72)
      b = random({n}, :f32, 1.0, 73)
      f = fn x, w, b -> Nx.dot(x, w) |> Nx.add(b) |> Nx.max(0) end
      assert_same(f, [[x, w, b]])
      if fuses?(), do: assert("fused_gemm" in Nx.Vulkan.program_info(f, [x, w, b]).kernels)
    end

    test "intermediates whose uses do not overlap share buffers; results stay bit for bit" do
      # f64 ops do not fuse: eight dispatches in a chain, each result read only by the next.
      f = fn x ->
        y = x |> Nx.exp() |> Nx.sin() |> Nx.cos() |> Nx.tanh() |> Nx.sigmoid()
        {y |> Nx.atan() |> Nx.cosh() |> Nx.add(x), Nx.multiply(y, 2.0)}
      end

      args = for seed <- [31, 32], do: [random({4096}, :f64, 1.0, seed)]
      assert_same(f, args)
      info = Nx.Vulkan.program_info(f, hd(args))
      assert info.dispatches == 9
      # The argument, two results, the constant 2.0 and the chain's intermediates in two
      # buffers (one written while the other is read): 6 buffers for 9 results.
      assert info.buffers == 6, inspect(info)
      assert info.bytes == 5 * 4096 * 8 + 8

      for cap <- [0, 4] do
        Nx.Vulkan.set_batch_max(cap)
        assert_same(f, args)
      end
    end

    test "a fused chain past 2^24 elements (a 2-D grid of workgroups) and a broadcast row" do
      rows = div(2 ** 24, 7) + 200
      n = rows * 7
      assert n > 2 ** 24
      x = Nx.iota({n}, type: :f32) |> Nx.divide(n) |> Nx.reshape({rows, 7})
      row = Nx.tensor([1.0, -2.0, 0.5, 3.0, -0.25, 8.0, 0.0])

      f = fn x, row ->
        y = x |> Nx.multiply(row) |> Nx.add(1.0)
        Nx.select(Nx.greater(y, 1.0), Nx.subtract(y, x), Nx.negate(y))
      end

      assert_same(f, [[x, row]])
      assert %{fused_kernels: kernels} = Nx.Vulkan.program_info(f, [x, row])
      assert kernels >= 1 == fuses?()
    end

    test "4-bit integers and 8-bit floats (host-fallback types) run under the Evaluator, counted" do
      for type <- [{:s, 4}, {:u, 2}, {:f, 8}, {:f8_e4m3fn, 8}] do
        x = Nx.iota({12}, type: {:s, 8}) |> Nx.remainder(5) |> Nx.as_type(type)
        f = fn x -> Nx.add(x, x) |> Nx.multiply(x) end
        {_, delta} = census_delta(fn -> assert_same(f, [[x]]) end)
        assert delta.programs == 0
        assert [{"a host read" <> _, 1}] = Map.to_list(delta.evaluator)
      end
    end

    test "outputs that are inputs, constants or the same tensor twice" do
      f = fn x ->
        y = Nx.negate(x)
        {x, Nx.tensor(3.0), y, y, Nx.reshape(x, {6})}
      end

      compiled = Nx.Defn.jit(f, compiler: Nx.Vulkan)
      x = Nx.iota({2, 3}, type: :f32)
      {x_out, three, y1, y2, flat} = compiled.(x)
      assert Nx.to_binary(x_out) == Nx.to_binary(x)
      assert Nx.to_number(three) == 3.0
      assert Nx.to_binary(y1) == Nx.to_binary(Nx.negate(x))
      assert y1.data.ref == y2.data.ref
      assert Nx.to_binary(flat) == Nx.to_binary(x)

      # A second call's outputs are new tensors: the first call's stay as they were.
      {_, _, y3, _, _} = compiled.(Nx.add(x, 10))
      assert y3.data.ref != y1.data.ref
      assert Nx.to_binary(y1) == Nx.to_binary(Nx.negate(x))
      assert Nx.to_flat_list(y3) == Nx.to_flat_list(Nx.negate(Nx.add(x, 10)))
    end

    test "a compiled function (Nx.Defn.compile) replays, with host arguments moved to the device" do
      template = [Nx.template({4, 3}, :f32), Nx.template({3}, :f32)]

      compiled =
        Nx.Defn.compile(fn a, b -> Nx.add(a, b) |> Nx.exp() end, template, compiler: Nx.Vulkan)

      a = Nx.iota({4, 3}, type: :f32, backend: Nx.BinaryBackend)
      b = Nx.tensor([1.0, 2.0, 3.0], backend: Nx.BinaryBackend)
      result = compiled.(a, b)
      assert %Nx.Vulkan.Backend{} = result.data

      assert Nx.to_binary(result) ==
               Nx.to_binary(
                 Nx.exp(
                   Nx.add(
                     Nx.backend_copy(a, Nx.Vulkan.Backend),
                     Nx.backend_copy(b, Nx.Vulkan.Backend)
                   )
                 )
               )
    end

    test "program_info/3 says what a call queues, or why the function is not compiled" do
      info =
        Nx.Vulkan.program_info(&Fns.mlp_loss/4, [
          random({4, 3}),
          random({3}),
          random({3, 2}),
          random({5, 4})
        ])

      assert %{dispatches: d, commands: c, buffers: b, bytes: bytes, barriers: barriers} = info
      assert d > 0 and c >= d and b > 0 and bytes > 0 and barriers < c

      assert {:evaluator, "a host read" <> _} =
               Nx.Vulkan.program_info(&Fns.branch_with_loop/2, [random({4, 4}), Nx.tensor(2)])
    end

    test "telemetry: a compile event per structure, a run event per call" do
      parent = self()
      ref = make_ref()

      :telemetry.attach_many(
        {__MODULE__, ref},
        [[:nx_vulkan, :compile], [:nx_vulkan, :run]],
        &__MODULE__.forward/4,
        {parent, ref}
      )

      try do
        f = Nx.Defn.jit(fn x -> Nx.add(x, 1) |> Nx.exp() end, compiler: Nx.Vulkan)
        f.(Nx.iota({7}, type: :f32))
        f.(Nx.iota({7}, type: :f32))

        assert_received {^ref, [:nx_vulkan, :compile], %{dispatches: d, trace_us: _, capture_us: _},
                         %{result: :program}}

        assert d == if(fuses?(), do: 1, else: 2)

        refute_received {^ref, [:nx_vulkan, :compile], _, _}
        assert_received {^ref, [:nx_vulkan, :run], %{host_us: _}, _}
        assert_received {^ref, [:nx_vulkan, :run], %{host_us: _}, _}
      after
        :telemetry.detach({__MODULE__, ref})
      end
    end

    test "input-independent work (constants, iotas) runs once, not at every call" do
      f = fn x -> Nx.add(x, Nx.iota({64}, type: :f32)) |> Nx.multiply(Nx.tensor(2.0)) end
      x = Nx.iota({64}, type: :f32)
      compiled = Nx.Defn.jit(f, compiler: Nx.Vulkan)
      compiled.(x)
      Nx.Vulkan.flush()
      # The add and the multiply (fused into one dispatch); the iota and the constant ran at
      # capture.
      s0 = Nx.Vulkan.stats()
      for _ <- 1..5, do: compiled.(x)
      Nx.Vulkan.flush()
      s1 = Nx.Vulkan.stats()
      assert s1.recorded - s0.recorded == if(fuses?(), do: 5, else: 10)
      assert Nx.to_binary(compiled.(x)) == Nx.to_binary(Nx.Defn.jit(f).(x))
    end

    test "Nx.Defn.global_default_options(compiler: Nx.Vulkan) and __to_backend__" do
      previous = Nx.Defn.default_options()
      Nx.Defn.global_default_options(compiler: Nx.Vulkan)

      try do
        args = [random({4, 3}), random({3}), random({3, 2}), random({5, 4})]
        {_, delta} = census_delta(fn -> apply(&Fns.mlp_loss/4, args) end)

        assert delta.replays == 1
        assert Nx.Defn.to_backend(compiler: Nx.Vulkan) == {Nx.Vulkan.Backend, []}
      after
        Nx.Defn.global_default_options(previous)
      end
    end
  end

  describe "what runs under the Evaluator" do
    test "while, cond, hooks, random and deferred checks give the Evaluator's results, counted by reason" do
      x = random({4, 4})
      # A fixed trip count unrolls into the program; a predicate computed from the argument
      # chooses between branches that both compute (selects); one whose branch holds a loop
      # runs under the Evaluator.
      {_, delta} = census_delta(fn -> assert_same(&Fns.counted/1, [[x], [Nx.negate(x)]]) end)
      assert delta == %{programs: 1, replays: 2, evaluator: %{}}

      {_, delta} = census_delta(fn -> assert_same(&Fns.branch/1, [[x], [Nx.subtract(x, 100)]]) end)
      assert delta == %{programs: 1, replays: 2, evaluator: %{}}

      {_, delta} =
        census_delta(fn ->
          assert_same(&Fns.branch_with_loop/2, [[x, Nx.tensor(2)], [Nx.negate(x), Nx.tensor(2)]])
        end)

      assert delta.programs == 0

      assert [{"a host read of a value computed from the arguments" <> _, 2}] =
               Map.to_list(delta.evaluator)

      parent = self()

      hooked =
        Nx.Defn.jit(&Fns.hooked/1, compiler: Nx.Vulkan, hooks: %{seen: &send(parent, {:seen, &1})})

      result = hooked.(x)
      assert_receive {:seen, seen}
      assert Nx.to_binary(seen) == Nx.to_binary(Nx.exp(x))
      assert Nx.to_binary(result) == Nx.to_binary(Nx.add(Nx.exp(x), 1))

      # Nx.Random's loops have fixed trip counts: a dropout mask compiles.
      {_, delta} =
        census_delta(fn ->
          assert_same(&Fns.dropout/2, [[Nx.Random.key(1), x], [Nx.Random.key(2), x]])
        end)

      assert delta == %{programs: 1, replays: 2, evaluator: %{}}

      {_, delta} =
        census_delta(fn ->
          assert_same(&Fns.divide_ints/2, [[Nx.tensor([7, 9]), Nx.tensor([2, 4])]])
        end)

      # Deferred checks compile: the quotient's check is the program's, made again for each call.
      assert delta == %{programs: 1, replays: 1, evaluator: %{}}
      divide = Nx.Defn.jit(&Fns.divide_ints/2, compiler: Nx.Vulkan)

      assert_raise ArithmeticError, fn ->
        divide.(Nx.tensor([1, 2]), Nx.tensor([1, 0])) |> Nx.to_list()
      end
    end

    test "deferred checks in a program: each call's outputs carry their own, raised at their read" do
      checked = Nx.Defn.jit(&Fns.checked_ops/3, compiler: Nx.Vulkan)
      {a, b, c} = {Nx.tensor([7, -9, 12]), Nx.tensor([2, 4, 5]), Nx.tensor([1, 2, 3])}

      {_, delta} =
        census_delta(fn ->
          assert_same(&Fns.checked_ops/3, [[a, b, c], [Nx.negate(a), c, b]])
        end)

      assert delta.evaluator == %{}

      # A zero divisor: the outputs computed from the quotient raise at their read, the one
      # computed from neither checked op does not; a later clean call is unaffected, and the
      # failed call's outputs still raise after it.
      {q, combined, doubled} = checked.(a, Nx.tensor([2, 0, 5]), c)
      {q2, combined2, _} = checked.(a, b, c)
      assert Nx.to_list(doubled) == [14, -18, 24]
      assert Nx.to_list(q2) == Nx.to_list(Nx.quotient(a, b))
      assert Nx.to_list(combined2) == Nx.to_list(Nx.add(Nx.quotient(a, b), Nx.left_shift(a, c)))
      assert_raise ArithmeticError, ~r/integer quotient by zero/, fn -> Nx.to_list(q) end
      assert_raise ArithmeticError, ~r/integer quotient by zero/, fn -> Nx.to_list(combined) end

      # Both checks failing: the first made (the quotient's) is the one raised.
      {_, combined, _} = checked.(a, Nx.tensor([0, 1, 1]), Nx.tensor([1, -2, 1]))
      assert_raise ArithmeticError, ~r/quotient by zero/, fn -> Nx.to_list(combined) end
      # Only the shift's.
      {q, combined, _} = checked.(a, b, Nx.tensor([1, -2, 1]))
      assert Nx.to_list(q) == Nx.to_list(Nx.quotient(a, b))
      assert_raise ArgumentError, ~r/cannot left shift by -2/, fn -> Nx.to_list(combined) end

      # A singular triangular matrix.
      solve = Nx.Defn.jit(&Fns.solve_lower/2, compiler: Nx.Vulkan)
      m = Nx.tensor([[2.0, 0.0], [1.0, 3.0]])
      assert_same(&Fns.solve_lower/2, [[m, Nx.tensor([1.0, 2.0])]])
      singular = solve.(Nx.tensor([[2.0, 0.0], [1.0, 0.0]]), Nx.tensor([1.0, 2.0]))
      assert_raise ArgumentError, ~r/singular/, fn -> Nx.to_binary(singular) end

      # In a device loop's body: the loop compiles, its outputs carry the check.
      {_, delta} =
        census_delta(fn -> assert_same(&Fns.divide_loop/2, [[a, Nx.tensor(2)]]) end)

      assert delta.evaluator == %{}
    end

    test "deferred checks in device loops: the first failure, raised at the read, at every cap" do
      x = Nx.tensor([1000, -2000, 3000])
      divide = Nx.Defn.jit(&Fns.countdown_divide/3, compiler: Nx.Vulkan)
      in_condition = Nx.Defn.jit(&Fns.divide_in_condition/2, compiler: Nx.Vulkan)

      host = &Nx.backend_copy(&1, Nx.BinaryBackend)

      {_, delta} =
        census_delta(fn ->
          for cap <- [0, 4, 64] do
            Nx.Vulkan.set_batch_max(cap)

            # No zero divisor; one in the last iteration; one mid-way, the loop going on past it
            # (the first failure is the one reported); a negative divisor.
            for {d, n} <- [{5, 3}, {5, 5}, {5, 6}, {5, 40}, {-3, 2}] do
              expected = outcome(fn -> Fns.countdown_divide(host.(x), d, n) end)
              assert outcome(fn -> divide.(x, d, n) end) == expected
            end

            # The condition's check, at its last (false) evaluation too.
            for n <- [1, 50, 0, -5] do
              expected = outcome(fn -> Fns.divide_in_condition(host.(x), n) end)
              assert outcome(fn -> in_condition.(x, n) end) == expected
            end
          end
        end)

      assert delta.evaluator == %{}

      assert {:raised, ArithmeticError, "integer quotient by zero" <> _} =
               outcome(fn -> divide.(x, 5, 6) end)

      # A failed run's outputs keep raising; a clean run after it is unaffected.
      failed = divide.(x, 5, 6)
      clean = divide.(x, 5, 3)
      assert_raise ArithmeticError, fn -> Nx.to_binary(failed) end
      assert Nx.to_binary(clean) == Nx.to_binary(Fns.countdown_divide(host.(x), 5, 3))
      assert_raise ArithmeticError, fn -> Nx.to_binary(failed) end

      # Concurrent callers of one compiled loop: each run's outputs carry its own checks.
      runs =
        [{5, 3}, {5, 6}, {5, 2}, {2, 4}, {7, 7}, {7, 9}, {-1, 3}, {3, 3}]
        |> Task.async_stream(fn {d, n} -> {{d, n}, outcome(fn -> divide.(x, d, n) end)} end,
          max_concurrency: 8,
          timeout: :infinity
        )
        |> Enum.map(fn {:ok, r} -> r end)

      for {{d, n}, got} <- runs do
        assert got == outcome(fn -> Fns.countdown_divide(host.(x), d, n) end)
      end

      assert [%{kernels: kernels}] =
               Nx.Vulkan.program_info(&Fns.countdown_divide/3, [x, 5, 3]).loops

      assert "loop_check" in kernels
    end

    test "deferred checks in device loops nested in a device loop's body, at every cap" do
      x = Nx.tensor([1000, -2000, 3000])
      nested = Nx.Defn.jit(&Fns.nested_divide/3, compiler: Nx.Vulkan)

      host = &Nx.backend_copy(&1, Nx.BinaryBackend)

      {_, delta} =
        census_delta(fn ->
          for cap <- [0, 4, 64] do
            Nx.Vulkan.set_batch_max(cap)

            # Clean; the inner loop's check failing mid-way (the loops going on past it), in the
            # last outer iteration, at the inner loop's first run; the outer body's check; no
            # iteration at all.
            for {n, k} <- [{2, 2}, {4, 0}, {4, 2}, {5, 4}, {3, 1}, {7, 9}, {0, 0}] do
              expected = outcome(fn -> Fns.nested_divide(host.(x), n, k) end)
              assert outcome(fn -> nested.(x, n, k) end) == expected, "n = #{n}, k = #{k}"
            end
          end
        end)

      assert delta.evaluator == %{}

      assert {:raised, ArithmeticError, _} = outcome(fn -> nested.(x, 4, 2) end)
      assert {:ok, _} = outcome(fn -> nested.(x, 4, 0) end)

      assert [%{kernels: kernels}] = Nx.Vulkan.program_info(&Fns.nested_divide/3, [x, 4, 2]).loops
      assert "device_loop" in kernels and "loop_check" in kernels
    end

    test "hooks get every call's values, in the Evaluator's order, from a compiled program" do
      parent = self()
      Process.put(:hook_test_pid, parent)
      seen = fn name -> &send(parent, {name, &1}) end
      hooks = %{a: seen.(:a), pair: seen.(:pair), loop: seen.(:loop)}

      run = fn compiler, x, y ->
        Nx.Defn.jit(&Fns.hooks_everywhere/2, [hooks: hooks] ++ compiler).(x, y)
      end

      received = fn ->
        for _ <- 1..6 do
          receive do
            {name, value} -> {name, bits(value)}
          after
            5_000 -> flunk("a hook was not called")
          end
        end
      end

      for seed <- [1, 2] do
        x = random({3, 4}, :f32, 1.0, seed)
        y = random({3, 4}, :f32, 1.0, seed + 10)
        expected = bits(run.([], x, y))
        evaluator = received.()

        {result, delta} = census_delta(fn -> run.([compiler: Nx.Vulkan], x, y) end)
        assert bits(result) == expected
        assert received.() == evaluator
        assert delta.evaluator == %{}
        assert [:a, :pair, :loop, :loop, :loop, :own] == Enum.map(evaluator, &elem(&1, 0))
      end

      # Two hooks of one name with different functions: the Evaluator calls each its own.
      twice = fn x ->
        a = Nx.Defn.Kernel.hook(Nx.exp(x), :same, &send(parent, {:first, &1}))
        Nx.Defn.Kernel.hook(Nx.add(a, 1), :same, &send(parent, {:second, &1}))
      end

      x = random({3, 4})
      {_, delta} = census_delta(fn -> Nx.Defn.jit(twice, compiler: Nx.Vulkan).(x) end)
      assert delta.evaluator == %{"hooks of one name with different functions" => 1}
      assert_receive {:first, first}
      assert_receive {:second, second}
      assert bits(second) == bits(Nx.add(first, 1))

      # Without the :hooks option, named hooks with no function of their own do nothing.
      Nx.Defn.jit(&Fns.hooks_everywhere/2, compiler: Nx.Vulkan).(x, x)
      assert_receive {:own, own}
      assert bits(own) == bits(Nx.Defn.jit(&Fns.hooks_everywhere/2).(x, x))
      refute_received {:a, _}
      assert_receive {:own, _}
      refute_received _
    end

    test "a deferred check on an argument passes to the outputs computed from it" do
      failed = Nx.quotient(Nx.tensor([4, 6]), Nx.tensor([2, 0]))
      f = fn a, b -> {Nx.add(a, 1), Nx.multiply(b, 2)} end
      {from_failed, clean} = Nx.Defn.jit(f, compiler: Nx.Vulkan).(failed, Nx.tensor([1, 2]))
      assert_raise ArithmeticError, fn -> Nx.to_list(from_failed) end
      assert Nx.to_list(clean) == [2, 4]
    end

    test "vectorized arguments" do
      f = fn x -> Nx.sum(Nx.exp(x)) end
      x = Nx.iota({3, 4}, type: :f32) |> Nx.vectorize(:rows)
      expected = Nx.Defn.jit(f).(x)
      actual = Nx.Defn.jit(f, compiler: Nx.Vulkan).(x)
      assert actual.vectorized_axes == [rows: 3]
      assert Nx.to_binary(Nx.devectorize(actual)) == Nx.to_binary(Nx.devectorize(expected))
    end
  end

  describe "device loops" do
    test "a while whose condition depends on the arguments compiles, bit for bit" do
      x = random({3, 5})

      {_, delta} =
        census_delta(fn ->
          # Zero iterations, a few, and many (chunks of iterations up to 256 and past them).
          assert_same(&Fns.double_until/2, [
            [Nx.abs(x), Nx.tensor(-1.0)],
            [Nx.abs(x), Nx.tensor(1.0e3)],
            [Nx.multiply(Nx.abs(x), 1.0e-30), Nx.tensor(1.0e30)]
          ])

          assert_same(&Fns.fib/1, [
            [Nx.tensor(0)],
            [Nx.tensor(1)],
            [Nx.tensor(40)],
            [Nx.tensor(700)]
          ])

          assert_same(&Fns.triple_until/1, [[Nx.tensor([1, 2, 5])], [Nx.tensor([2000, 1, 1])]])

          for type <- [:u8, :s16, :u32, :s32, :s64, :f32, :f64] do
            assert_same(&Fns.count_down/2, [
              [x, Nx.tensor(5, type: type)],
              [x, Nx.tensor(0, type: type)]
            ])
          end

          assert_same(&Fns.around_loops/2, [
            [x, Nx.tensor(0)],
            [x, Nx.tensor(5)],
            [Nx.negate(x), Nx.tensor(300)]
          ])
        end)

      # (Another test may have built fib's program already.)
      assert %{replays: 26, evaluator: %{}} = delta
      {_, i} = Nx.Defn.jit(&Fns.double_until/2, compiler: Nx.Vulkan).(Nx.abs(x), Nx.tensor(1.0e3))
      assert Nx.to_number(i) > 0
      info = Nx.Vulkan.program_info(&Fns.around_loops/2, [x, Nx.tensor(5)])
      assert Enum.count(info.kernels, &(&1 == "device_loop")) == 2
      refute info.prerecorded
    end

    test "every batch cap, and concurrent callers of one compiled loop" do
      compiled = Nx.Defn.jit(&Fns.fib/1, compiler: Nx.Vulkan)
      expected = for n <- 0..40, do: Nx.Defn.jit(&Fns.fib/1).(Nx.tensor(n)) |> bits()

      for cap <- [0, 1, 4, 64] do
        Nx.Vulkan.set_batch_max(cap)
        assert Enum.map(0..40, &bits(compiled.(Nx.tensor(&1)))) == expected
      end

      results =
        0..40
        |> Task.async_stream(&bits(compiled.(Nx.tensor(&1))),
          max_concurrency: 8,
          timeout: :infinity
        )
        |> Enum.map(fn {:ok, r} -> r end)

      assert results == expected
    end

    test "dynamic slices and put_slices merge with the ops between them, bit for bit" do
      t = with_specials(random({1, 32, 32}), [0, 3, 5]) |> Nx.reshape({32, 32})
      acc = Nx.broadcast(Nx.tensor(-0.5, backend: Nx.Vulkan.Backend), {40, 40})

      {_, delta} =
        census_delta(fn ->
          assert_same(&Fns.slide/3, [[t, acc, Nx.tensor(0)], [t, acc, Nx.tensor(75)]])
        end)

      assert delta.evaluator == %{}

      if fuses?() do
        # The body: one merged kernel of two sections, the starts' s32 arithmetic, then the copy
        # of acc, the slice, the f32 add and the put_slice.
        info = Nx.Vulkan.program_info(&Fns.slide_step/3, [t, acc, Nx.tensor(7)])
        assert %{merged_kernels: 1, dispatches: 1, barriers: 0} = info
        refute "copy_starts_b4" in info.kernels
      end

      t3 = random({6, 7, 9})
      acc3 = random({9, 6, 7})

      starts =
        for {a, b, c} <- [
              {1, 2, 3},
              {-4, 9, 200},
              {Bitwise.bsl(1, 33), 0, -1},
              {-Bitwise.bsl(1, 40), 5, 127}
            ] do
          [
            Nx.tensor(a, type: :s64),
            Nx.tensor(b + Bitwise.bsl(Bitwise.band(b, 1), 35), type: :u64),
            Nx.tensor(c |> max(-128) |> min(127), type: :s8)
          ]
        end

      assert_same(&Fns.slide_wide/5, Enum.map(starts, &[t3, acc3 | &1]))

      if fuses?() do
        info = Nx.Vulkan.program_info(&Fns.slide_wide/5, [t3, acc3 | hd(starts)])
        assert info.merged_kernels == 1
        refute "copy_starts_b4" in info.kernels
      end
    end

    test "an iteration's condition, body and state update merge into as few kernels as types allow" do
      x = random({64})
      b = Nx.iota({16}, type: :u8, backend: Nx.Vulkan.Backend)

      for cap <- [0, 4, 64] do
        Nx.Vulkan.set_batch_max(cap)
        assert_same(&Fns.scale_loop/2, [[x, Nx.tensor(0)], [x, Nx.tensor(3)], [x, Nx.tensor(300)]])
        assert_same(&Fns.narrow_loop/2, [[b, Nx.tensor(1)], [b, Nx.tensor(37)]])
        assert_same(&Fns.fib/1, [[Nx.tensor(0)], [Nx.tensor(37)], [Nx.tensor(300)]])
      end

      if fuses?() do
        # All 32-bit integers: the condition, the body, the copy aside of b (returned as a) and
        # the gated update, one kernel an iteration.
        assert [%{kernels: ["merged_stages"], levels: 1}] =
                 Nx.Vulkan.program_info(&Fns.fib/1, [Nx.tensor(5)]).loops

        # The counter's s32 section and the float section that reads x and updates it: one
        # kernel an iteration.
        assert [%{kernels: ["merged_stages"], levels: 1}] =
                 Nx.Vulkan.program_info(&Fns.scale_loop/2, [x, Nx.tensor(5)]).loops

        acc = Nx.broadcast(Nx.tensor(-0.5, backend: Nx.Vulkan.Backend), {40, 40})
        t = random({32, 32})

        assert [%{kernels: ["merged_stages"], levels: 1}] =
                 Nx.Vulkan.program_info(&Fns.slide/3, [t, acc, Nx.tensor(5)]).loops
      end
    end

    test "a loop that depends on the arguments inside a loop the capture unrolls" do
      x = random({5})

      {_, delta} =
        census_delta(fn ->
          assert_same(&Fns.in_unrolled/2, [[x, Nx.tensor(0)], [x, Nx.tensor(4)]])
        end)

      assert delta.evaluator == %{}
      info = Nx.Vulkan.program_info(&Fns.in_unrolled/2, [x, Nx.tensor(2)])
      assert Enum.count(info.kernels, &(&1 == "device_loop")) == 3
    end

    test "a device loop nested in a device loop's body, at every batch cap" do
      x = random({4})
      iterations = Nx.Vulkan.stats().loop_iterations

      {_, delta} =
        census_delta(fn ->
          for cap <- [0, 4, 64] do
            Nx.Vulkan.set_batch_max(cap)

            assert_same(&Fns.nested/2, [
              [x, Nx.tensor(0)],
              [x, Nx.tensor(1)],
              [x, Nx.tensor(4)],
              [Nx.negate(x), Nx.tensor(23)]
            ])
          end
        end)

      assert delta.evaluator == %{}
      # The outer loop's iterations and the inner loops' (0 + 1 + ... + 22 of them at 23).
      assert Nx.Vulkan.stats().loop_iterations - iterations >= 3 * (23 + 253)
      info = Nx.Vulkan.program_info(&Fns.nested/2, [x, Nx.tensor(4)])
      assert Enum.count(info.kernels, &(&1 == "device_loop")) == 1
    end

    test "conds whose predicates depend on the arguments: every branch computes, selects choose" do
      x = random({3, 4})
      nan = Nx.put_slice(x, [1, 2], Nx.tensor([[:nan]], type: :f32))

      {_, delta} =
        census_delta(fn ->
          for cap <- [0, 64] do
            Nx.Vulkan.set_batch_max(cap)

            assert_same(
              &Fns.branches/2,
              for(
                x <- [Nx.add(Nx.abs(x), 0.6), x, nan, Nx.negate(Nx.abs(x))],
                k <- [0, 2, 5],
                do: [x, Nx.tensor(k)]
              )
            )
          end
        end)

      assert delta.evaluator == %{}
      assert delta.programs == 1

      # A branch that would raise where it is not taken (an integer quotient guarded against
      # a zero divisor): the cond stays, under the Evaluator, which takes only its branch.
      guarded = Nx.Defn.jit(&Fns.guarded_quotient/2, compiler: Nx.Vulkan)
      {result, delta} = census_delta(fn -> guarded.(Nx.tensor([7, 9]), Nx.tensor([0, 4])) end)
      assert Nx.to_list(result) == [7, 9]
      assert [{"a host read" <> _, 1}] = Map.to_list(delta.evaluator)
      assert Nx.to_list(guarded.(Nx.tensor([7, 9]), Nx.tensor([2, 4]))) == [3, 2]

      # A hook in a branch fires only where the branch is taken: the Evaluator's.
      parent = self()

      hooked =
        Nx.Defn.jit(&Fns.hooked_branch/1,
          compiler: Nx.Vulkan,
          hooks: %{taken: &send(parent, {:taken, &1})}
        )

      {result, delta} = census_delta(fn -> hooked.(Nx.negate(Nx.abs(x))) end)
      assert Nx.to_binary(result) == Nx.to_binary(Nx.negate(Nx.abs(x)))
      refute_received {:taken, _}
      assert [{"a host read" <> _, 1}] = Map.to_list(delta.evaluator)
    end

    test "a loop with hooks runs under the Evaluator" do
      x = random({4})
      parent = self()

      hooked =
        Nx.Defn.jit(&Fns.hooked_loop/2,
          compiler: Nx.Vulkan,
          hooks: %{step: &send(parent, {:step, Nx.to_binary(&1)})}
        )

      {result, delta} = census_delta(fn -> hooked.(x, Nx.tensor(3)) end)
      assert Nx.to_binary(result) == Nx.to_binary(Nx.multiply(x, 8))
      assert [{"a host read" <> _, 1}] = Map.to_list(delta.evaluator)

      for k <- [2, 4, 8] do
        expected = Nx.to_binary(Nx.multiply(x, k))
        assert_receive {:step, ^expected}
      end
    end
  end

  describe "under load" do
    test "the MNIST step is bit-identical to the Evaluator's at every batch cap" do
      shape = {32, 784, 128, 10}
      {params, x, labels} = MNISTMLP.inputs(shape, Nx.Vulkan.Backend)

      runs =
        for cap <- [0, 1, 4, 64, 256] do
          Nx.Vulkan.set_batch_max(cap)
          step = Nx.Defn.jit(&MNISTMLP.step/3, compiler: Nx.Vulkan)
          sgd = Nx.Defn.jit(&MNISTMLP.sgd/3, compiler: Nx.Vulkan)

          {losses, final} =
            Enum.map_reduce(1..3, params, fn _, params ->
              {loss, grads} = step.(params, x, labels)
              {Nx.to_binary(loss), sgd.(params, grads, 0.1)}
            end)

          {losses, bits(final)}
        end

      assert length(Enum.uniq(runs)) == 1, "results differ across batch caps"

      evaluator_step = Nx.Defn.jit(&MNISTMLP.step/3)
      {loss, _} = evaluator_step.(params, x, labels)
      assert hd(elem(hd(runs), 0)) == Nx.to_binary(loss)
    end

    test "a program's commands run in dependency levels: fewer barriers than in captured order" do
      {params, x, labels} = MNISTMLP.inputs({32, 784, 128, 10}, Nx.Vulkan.Backend)
      info = Nx.Vulkan.program_info(&MNISTMLP.step/3, [params, x, labels])
      # 47 commands before fusion (the Evaluator's step, less the loss read's copy; a broadcast
      # that only adds a unit axis shares its input's buffer), less the transposes of the two
      # weight gradients, folded into their GEMMs.
      assert %{prerecorded: pre, replay_copies: copies, fused_kernels: kernels, fused_ops: ops} =
               info

      # Pre-recorded (copying the 6 arguments and 5 results) past twice as many commands as
      # buffers copied on CPU devices, as copy dispatches (one each way) on GPUs.
      copied = if Nx.Vulkan.Device.class() == :software, do: 11, else: 2
      assert pre == info.commands > 2 * copied
      assert copies == if(pre, do: 11, else: 0)
      assert kernels >= 1 == fuses?()
      assert info.folded_transposes == 2
      # (On CPU devices a flat whole-buffer copy is a transfer command, not a dispatch.)
      # Merged kernels (small stages of consecutive levels in one workgroup) replace commands too.
      if fuses?(),
        do:
          assert(
            info.commands ==
              47 - 2 - ops + kernels - info.merged_commands + info.merged_kernels
          )

      assert info.barriers < info.barriers_in_capture_order
    end

    test "concurrent callers of one compiled function each get their own results" do
      # Replays share the program's intermediates: a short program (queued command by command)
      # and a long one (pre-recorded), each called from 8 processes that read only at the end,
      # so their replays overlap in the queue.
      short = fn x -> x |> Nx.multiply(3) |> Nx.add(1) |> Nx.sum() end

      long = fn x ->
        Enum.reduce(1..12, x, fn i, acc ->
          acc |> Nx.multiply(0.5) |> Nx.add(i) |> Nx.sum(axes: [0]) |> Nx.add(acc)
        end)
      end

      for f <- [short, long] do
        compiled = Nx.Defn.jit(f, compiler: Nx.Vulkan)
        input = fn offset -> Nx.iota({1000}, type: :f32) |> Nx.add(offset) end
        compiled.(input.(0))

        results =
          1..8
          |> Task.async_stream(
            fn k ->
              for(j <- 1..25, do: {k * 100 + j, compiled.(input.(k * 100 + j))})
              |> Enum.map(fn {offset, t} -> {offset, Nx.to_binary(t)} end)
            end,
            max_concurrency: 8,
            # The test's own timeout bounds a hang; each caller's 25 calls took over 5 s (the
            # default) on a slow host of this machine kind.
            timeout: :infinity
          )
          |> Enum.flat_map(fn {:ok, r} -> r end)

        for {offset, got} <- results,
            do: assert(got == Nx.to_binary(Nx.Defn.jit(f).(input.(offset))))
      end
    end

    test "a pre-recorded program with more than 8 arguments and results (copied in chunks)" do
      # Each argument goes through GEMMs and reductions that do not fuse, so the program holds
      # more commands than the buffers a replay copies and is pre-recorded; 10 arguments and 10
      # results take two copy dispatches (copy_multi.comp, 8 pairs each) on each side.
      fun = fn args ->
        args
        |> Tuple.to_list()
        |> Enum.map(fn a ->
          a |> Nx.dot(Nx.transpose(a)) |> Nx.sum(axes: [1]) |> Nx.dot(a) |> Nx.cumulative_sum()
        end)
        |> List.to_tuple()
      end

      args_for = fn k ->
        for(
          i <- 0..9,
          do: Nx.iota({3, 5 + i}, type: :f32) |> Nx.multiply(0.25 * (k + i)) |> Nx.sin()
        )
        |> List.to_tuple()
      end

      info = Nx.Vulkan.program_info(fun, [args_for.(0)])
      assert %{prerecorded: true, replay_copies: 20} = info
      assert_same(fun, for(k <- 0..2, do: [args_for.(k)]))
    end

    test "with per-command GPU timing a replay is queued command by command, with the same results" do
      # A short program (recorded again at each call, not pre-recorded): one queue entry
      # normally; while timing each command, its commands one by one, each kernel timed on its own.
      fun = fn x, y -> x |> Nx.multiply(y) |> Nx.sum(axes: [0]) |> Nx.dot(y) end
      x = Nx.iota({6, 5}, type: :f32) |> Nx.divide(7) |> Nx.sin()
      y = Nx.iota({5}, type: :f32) |> Nx.add(1) |> Nx.log()
      compiled = Nx.Defn.jit(fun, compiler: Nx.Vulkan)
      assert %{prerecorded: false} = Nx.Vulkan.program_info(fun, [x, y])
      expected = Nx.to_binary(compiled.(x, y))
      Nx.Vulkan.flush()
      Nx.Vulkan.set_gpu_timing(true)

      try do
        Nx.Vulkan.take_kernel_times()
        s0 = Nx.Vulkan.stats()
        timed = compiled.(x, y)
        assert Nx.to_binary(timed) == expected
        s1 = Nx.Vulkan.stats()
        times = Nx.Vulkan.take_kernel_times()
        # Every command of the program (and the read's copy, where there is one) timed on its own.
        {commands, _ns} =
          times |> Map.values() |> Enum.reduce({0, 0}, fn {c, n}, {ca, na} -> {ca + c, na + n} end)

        assert commands == s1.recorded - s0.recorded
        assert commands >= 2
      after
        Nx.Vulkan.set_gpu_timing(false)
      end

      assert Nx.to_binary(compiled.(x, y)) == expected
    end

    test "deallocating arguments and results leaves the program intact" do
      compiled = Nx.Defn.jit(fn x -> Nx.exp(x) |> Nx.add(x) end, compiler: Nx.Vulkan)
      x = Nx.iota({256}, type: :f32) |> Nx.divide(100)
      first = compiled.(x)
      expected = Nx.to_binary(first)
      Nx.backend_deallocate(first)
      for _ <- 1..3, do: compiled.(x) |> Nx.backend_deallocate()
      assert Nx.to_binary(compiled.(x)) == expected
      assert_raise ArgumentError, fn -> Nx.to_binary(first) end
    end
  end
end

defmodule Nx.Vulkan.CompilerDiskCacheTest do
  use ExUnit.Case, async: true
  @moduletag :subprocess

  # A child VM that compiles a function with a fusable chain and prints what it compiled.
  @script ~S"""
  Nx.default_backend(Nx.Vulkan.Backend)
  f = fn x, y -> x |> Nx.exp() |> Nx.add(y) |> Nx.multiply(3.0) |> Nx.negate() end
  x = Nx.iota({8, 8}, type: :f32) |> Nx.divide(64)
  r = Nx.Defn.jit(f, compiler: Nx.Vulkan).(x, Nx.iota({8}, type: :f32))
  s = Nx.Vulkan.stats()
  info = Nx.Vulkan.program_info(f, [x, Nx.iota({8}, type: :f32)])
  IO.puts("compiled=#{s.fused_kernels_compiled} from_disk=#{s.fused_kernels_from_disk} fused=#{info.fused_kernels} precise=#{s.precise_f32}")
  IO.puts("sum=#{Nx.to_number(Nx.sum(r))}")
  """

  defp child(dir) do
    output = Nx.Vulkan.DeviceCase.mix_run!(@script, [{"NXV_PIPELINE_CACHE", dir}])

    [_, compiled, from_disk, fused, precise] =
      Regex.run(~r/compiled=(\d+) from_disk=(\d+) fused=(\d+) precise=(\w+)/, output)

    [_, sum] = Regex.run(~r/sum=(\S+)/, output)

    {String.to_integer(compiled), String.to_integer(from_disk), String.to_integer(fused), precise,
     sum}
  end

  setup do
    dir =
      Path.join(System.tmp_dir!(), "nx_vulkan_fused_cache_#{System.unique_integer([:positive])}")

    on_exit(fn -> File.rm_rf!(dir) end)
    %{dir: dir}
  end

  test "a second start with a warm disk cache compiles no fused kernel", %{dir: dir} do
    {compiled, 0, fused, precise, sum} = child(dir)

    if precise == "true" do
      assert fused >= 1 and compiled == fused
      assert [_ | _] = Path.wildcard(Path.join(dir, "fused-*.spv"))
      # The second start reads the SPIR-V back and computes the same result.
      assert {0, ^fused, ^fused, _, ^sum} = child(dir)
    end
  end
end

defmodule Nx.Vulkan.CompilerF32Test do
  # The compiler's tests again where f32 computes in f32 (the GPU classes other than
  # :discrete_large, or NXV_PRECISE=0), in child VMs: fused kernels then compute in f32 and must
  # still give the Evaluator's results bit for bit. :discrete also takes the GPUs' kernel
  # variants (register-blocked GEMMs with epilogues, the implicit-GEMM conv) on this device.
  use ExUnit.Case, async: true
  @moduletag :subprocess
  @moduletag timeout: 900_000

  for {label, env} <- [
        {"NXV_PRECISE=0", [{"NXV_PRECISE", "0"}]},
        {"the :discrete class", [{"NXV_DEVICE_CLASS", "discrete"}, {"NXV_SPIN_US", "0"}]}
      ] do
    test "the compiler's tests with f32 computed in f32, #{label}" do
      env = unquote(env)
      check = ~S[IO.puts("precise_f32=#{Nx.Vulkan.stats().precise_f32}")]
      assert Nx.Vulkan.DeviceCase.mix_run!(check, env) =~ "precise_f32=false"

      {output, status} =
        System.cmd(
          "mix",
          ~w(test --no-compile --no-deps-check --exclude subprocess --seed #{ExUnit.configuration()[:seed]} test/nx_vulkan/compiler_test.exs),
          env: [{"MIX_ENV", "test"} | env],
          stderr_to_stdout: true
        )

      assert status == 0, output
      assert output =~ ~r/\d+ tests, 0 failures/, output
    end
  end
end
