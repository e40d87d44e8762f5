defmodule Nx.Vulkan.ReduceDotTest do
  use Nx.Vulkan.DeviceCase, async: true

  describe "reductions over any axes" do
    for type <- [:f32, :f64], op <- [:sum, :reduce_max, :reduce_min, :product] do
      test "#{op} #{type}" do
        scale = if unquote(op) == :product, do: 1.5, else: 4.0
        t = random({3, 4, 5, 2}, unquote(type), scale, 9)

        for axes <- [nil, [0], [1], [3], [0, 2], [1, 3], [0, 1, 2, 3]], keep <- [false, true] do
          opts = if axes, do: [axes: axes, keep_axes: keep], else: [keep_axes: keep]
          assert_device(&apply(Nx, unquote(op), [&1, opts]), [t], rtol: 1.0e-6, atol: 1.0e-6)
        end
      end
    end

    test "f32 sums round once from f64, so they equal the BinaryBackend's" do
      t = random({257, 33}, :f32, 1.0, 3)
      assert_device(&Nx.sum(&1, axes: [0]), [t])
      assert_device(&Nx.sum/1, [t])
    end

    test "integer sums wrap like the BinaryBackend" do
      t = dev([[100, 100, 100], [27, -128, 5]], type: :s8)
      assert_device(&Nx.sum(&1, axes: [1]), [t])
      assert_device(&Nx.sum/1, [dev([4_000_000_000, 4_000_000_000], type: :u32)])
      assert_device(&Nx.reduce_max(&1, axes: [0]), [t])
      assert_device(&Nx.reduce_min/1, [dev([3, 200, 7], type: :u8)])
    end

    test "large reductions and many outputs" do
      assert_device(&Nx.sum/1, [random({300_000}, :f32, 1.0, 5)])
      assert_device(&Nx.reduce_max(&1, axes: [1]), [random({70_000, 3}, :f32, 1.0, 6)])
    end

    test "long reductions to few outputs split in two passes, every dtype path" do
      big = random({3, 100_003}, :f32, 1.0, 8)
      # Two passes, partials in f64 under precise f32: still the BinaryBackend's sum, rounded once.
      assert_device(&Nx.sum(&1, axes: [1]), [big], rtol: 1.0e-6, atol: 1.0e-6)
      assert_device(&Nx.reduce_min(&1, axes: [1]), [big])
      assert_device(&Nx.sum/1, [Nx.as_type(big, :f64)], rtol: 1.0e-12, atol: 1.0e-9)
      assert_device(&Nx.sum(&1, axes: [0]), [Nx.transpose(big)], rtol: 1.0e-6, atol: 1.0e-6)
      ints = big |> Nx.multiply(100) |> Nx.round() |> Nx.as_type(:s32)
      assert_device(&Nx.sum(&1, axes: [1]), [ints])
      assert_device(&Nx.sum/1, [Nx.as_type(big, :f16)], rtol: 1.0e-2, atol: 1.0)
    end

    test "column reductions: neighbouring outputs, one strided reduced dim (own kernel on GPUs)" do
      for type <- [:f32, :f64, :s32, :u8], op <- [:sum, :product, :reduce_max, :reduce_min] do
        t = random({300, 70}, :f32, 3.0, 31) |> Nx.as_type(type)
        assert_device(&apply(Nx, op, [&1, [axes: [0]]]), [t], rtol: 1.0e-6)
        u = random({5, 33, 64}, :f32, 3.0, 32) |> Nx.as_type(type)
        assert_device(&apply(Nx, op, [&1, [axes: [1]]]), [u], rtol: 1.0e-6)
        assert_device(&apply(Nx, op, [&1, [axes: [0], keep_axes: true]]), [u], rtol: 1.0e-6)
      end
    end

    # On GPUs long columns split their rows into chunks (partials in the accumulator type, then a
    # second pass); the last chunk is partial, and f16 sums partials in f32, f32 in f64.
    test "long column reductions, every accumulator path" do
      base = random({4099, 70}, :f32, 3.0, 33)

      for type <- [:f32, :f64, :f16, :s32, :u8], op <- [:sum, :reduce_max, :reduce_min] do
        t = Nx.as_type(base, type)
        tol = if type == :f16, do: [rtol: 1.0e-2, atol: 1.0], else: [rtol: 1.0e-6, atol: 1.0e-6]
        assert_device(&apply(Nx, op, [&1, [axes: [0]]]), [t], tol)

        assert_device(
          &apply(Nx, op, [&1, [axes: [1]]]),
          [Nx.reshape(t, {70, 4099}) |> Nx.transpose()],
          tol
        )
      end

      # The f32 sum of a long column rounds once from f64: the BinaryBackend's, bit for bit.
      assert_device(&Nx.sum(&1, axes: [0]), [random({9000, 40}, :f32, 1.0, 34)])
    end

    test "NaN propagates through max and min" do
      t = dev([[1.0, :nan, 3.0], [1.0, 2.0, 3.0]])
      assert_device(&Nx.reduce_max(&1, axes: [1]), [t])
      assert_device(&Nx.reduce_min(&1, axes: [1]), [t])
    end

    # Whatever NaN a device's conversion makes (the H200 turns a NaN double into 0x7FFFFFFF), a
    # reduction stores Nx's NaN, the positive quiet one, as element-wise ops do: through the
    # serial, tree, split and column kernels, from NaNs of either sign.
    test "a NaN result is the positive quiet NaN, bit for bit" do
      nan_bits = %{
        f32: <<0x7FC00000::32-little>>,
        f16: <<0x7E00::16-little>>,
        f64: <<0x7FF8000000000000::64-little>>
      }

      for type <- [:f32, :f16, :f64], {rows, cols} <- [{6, 9}, {3, 70_000}, {300, 40}] do
        negative_nan = Nx.from_binary(<<0xFFC00000::32-little>>, :f32) |> Nx.reshape({1, 1})
        x = random({rows, cols}, :f32, 1.0, 5) |> Nx.put_slice([1, 2], negative_nan)

        x =
          Nx.put_slice(x, [2, 1], Nx.broadcast(Nx.Constants.nan(:f32), {1, 1})) |> Nx.as_type(type)

        for op <- [:sum, :product, :reduce_max, :reduce_min], axes <- [[0], [1], nil] do
          host = apply(Nx, op, [x, [axes: axes]]) |> Nx.backend_copy(Nx.BinaryBackend)
          size = byte_size(nan_bits[type])
          elements = for <<v::binary-size(size) <- Nx.to_binary(host)>>, do: v
          mask = host |> Nx.is_nan() |> Nx.to_flat_list()
          nans = for {v, 1} <- Enum.zip(elements, mask), do: v
          assert nans != [], inspect({type, op, axes})
          assert Enum.uniq(nans) == [nan_bits[type]], inspect({type, op, axes, Enum.uniq(nans)})
        end
      end
    end
  end

  describe "dot" do
    for type <- [:f32, :f64] do
      test "2-D #{type}, plain and transposed operands" do
        a = random({17, 33}, unquote(type), 1.0, 1)
        b = random({33, 9}, unquote(type), 1.0, 2)
        tol = [rtol: 1.0e-6, atol: 1.0e-6]
        assert_device(&Nx.dot/2, [a, b], tol)
        # a^T . b^T, contracting a's axis 0 and b's axis 1, read through strides
        at = random({33, 17}, unquote(type), 1.0, 3)
        bt = random({9, 33}, unquote(type), 1.0, 4)
        assert_device(&Nx.dot(&1, [0], &2, [1]), [at, bt], tol)
        assert_device(&Nx.dot(&1, [1], &2, [1]), [a, bt], tol)
        assert_device(&Nx.dot(&1, [0], &2, [0]), [at, b], tol)
      end
    end

    test "large M and N (register-blocked GEMM on GPUs), ragged edges, transposed and batched" do
      # f32 sums of 70 products of terms up to 2 in magnitude: rounded once with f64
      # accumulation (precise_dot, CPU devices), or with up to ~70 f32 roundings of partial sums
      # of up to ~280 (GPUs' default, as cuBLAS): then an absolute bound of a few 1e-5.
      tol =
        if Nx.Vulkan.stats().precise_dot,
          do: [rtol: 1.0e-6],
          else: [rtol: 1.0e-6, atol: 1.0e-4]

      for type <- [:f32, :f64, :s32] do
        tol = if type == :f32, do: tol, else: [rtol: 1.0e-6]
        a = random({130, 70}, :f32, 2.0, 51) |> Nx.as_type(type)
        b = random({70, 197}, :f32, 2.0, 52) |> Nx.as_type(type)
        assert_device(&Nx.dot/2, [a, b], tol)
        assert_device(&Nx.dot(&1, [0], &2, [1]), [Nx.transpose(a), Nx.transpose(b)], tol)
        c = random({3, 129, 33}, :f32, 2.0, 53) |> Nx.as_type(type)
        d = random({3, 33, 140}, :f32, 2.0, 54) |> Nx.as_type(type)
        assert_device(&Nx.dot(&1, [2], [0], &2, [1], [0]), [c, d], tol)
      end
    end

    # f16 with 128+ rows and columns takes the tensor cores where the device has cooperative
    # matrices (f32 accumulation in their order, rounded once to f16): within an f16 rounding of
    # the BinaryBackend's f64 sum, with an absolute floor for cancellation.
    test "f16 GEMM large enough for tensor cores, ragged edges, transposed and batched" do
      tol = [rtol: 2.0e-3, atol: 2.0e-2]
      a = random({260, 70}, :f16, 2.0, 61)
      b = random({70, 300}, :f16, 2.0, 62)
      assert_device(&Nx.dot/2, [a, b], tol)
      assert_device(&Nx.dot(&1, [0], &2, [1]), [Nx.transpose(a), Nx.transpose(b)], tol)
      c = random({2, 129, 33}, :f16, 2.0, 63)
      d = random({2, 33, 140}, :f16, 2.0, 64)
      assert_device(&Nx.dot(&1, [2], [0], &2, [1], [0]), [c, d], tol)
    end

    # Operands whose unit stride runs along M (A transposed) or K (B transposed) load 16 bytes
    # at a time too, into tiles kept M- or K-contiguous; batches of many blocks take 128 x 256
    # blocks (the tensor-core kernel's block by shape, ops/matmul.rs coop_block).
    test "f16 GEMM of transposed aligned operands, and of a batch of many blocks" do
      tol = [rtol: 2.0e-3, atol: 2.0e-2]
      a = random({64, 256}, :f16, 2.0, 69)
      b = random({256, 64}, :f16, 2.0, 70)
      assert_device(&Nx.dot(&1, [0], &2, [1]), [a, b], tol)
      assert_device(&Nx.dot(&1, [0], &2, [0]), [a, Nx.transpose(b)], tol)
      assert_device(&Nx.dot(&1, [1], &2, [1]), [Nx.transpose(a), b], tol)
      c = random({30, 130, 16}, :f16, 2.0, 79)
      d = random({30, 16, 264}, :f16, 2.0, 80)
      assert_device(&Nx.dot(&1, [2], [0], &2, [1], [0]), [c, d], tol)
    end

    # Whole 128 x 128 blocks of row-major operands with K a multiple of 32 load 16 bytes at a
    # time (the tensor-core kernel's vector path); edge blocks of the second shape do not.
    test "f16 GEMM of aligned whole blocks, and whole blocks beside ragged ones" do
      tol = [rtol: 2.0e-3, atol: 2.0e-2]

      assert_device(
        &Nx.dot/2,
        [random({256, 32}, :f16, 2.0, 65), random({32, 256}, :f16, 2.0, 66)],
        tol
      )

      assert_device(
        &Nx.dot/2,
        [random({300, 64}, :f16, 2.0, 67), random({64, 260}, :f16, 2.0, 68)],
        tol
      )
    end

    # bf16 by bf16 with 128+ rows and columns takes the f16 tensor cores where the device has
    # them (each operand line scaled by a power of two into f16, ops/matmul.rs bf16_tensor_cores),
    # else the f32 GEMM: both an f32 sum truncated to bf16 as Nx casts, within a bf16 unit of
    # the BinaryBackend's f64 sum.
    test "bf16 GEMM large enough for tensor cores, ragged edges, transposed and batched" do
      tol = [rtol: 1.6e-2, atol: 1.0e-3]
      a = random({260, 70}, :bf16, 2.0, 81)
      b = random({70, 300}, :bf16, 2.0, 82)
      assert_device(&Nx.dot/2, [a, b], tol)
      assert_device(&Nx.dot(&1, [0], &2, [1]), [Nx.transpose(a), Nx.transpose(b)], tol)
      assert_device(&Nx.dot(&1, [1], &2, [1]), [a, Nx.transpose(b)], tol)
      assert_device(&Nx.dot(&1, [0], &2, [0]), [Nx.transpose(a), b], tol)
      c = random({3, 129, 64}, :bf16, 2.0, 83)
      d = random({3, 64, 264}, :bf16, 2.0, 84)
      assert_device(&Nx.dot(&1, [2], [0], &2, [1], [0]), [c, d], tol)
      # Lines of every magnitude, one scale each: rows and columns of their own binades, from
      # 2^-50 to 2^50, times small integers, so that every sum is exact in f32 and f64 alike and
      # the result equals the BinaryBackend's bit for bit.
      ints = fn shape, seed ->
        Nx.Random.randint(Nx.Random.key(seed), -3, 4, shape: shape) |> elem(0) |> Nx.as_type(:f32)
      end

      binades = fn n, axis ->
        Nx.iota({n})
        |> Nx.multiply(100 / (n - 1))
        |> Nx.subtract(50)
        |> Nx.floor()
        |> Nx.new_axis(axis)
      end

      e = Nx.multiply(ints.({256, 40}, 85), Nx.pow(2.0, binades.(256, 1))) |> Nx.as_type(:bf16)
      f = Nx.multiply(ints.({40, 128}, 86), Nx.pow(2.0, binades.(128, 0))) |> Nx.as_type(:bf16)
      assert_device(&Nx.dot/2, [e, f])
    end

    # Lines f16 cannot hold after one scaling (a NaN, an infinity, a subnormal, values more than
    # 29 binades apart) are marked on the device and their outputs summed from the bf16 values;
    # the rest still come from the tensor cores.
    test "bf16 GEMM with lines of NaN, infinities, subnormals and wide ranges" do
      put = fn t, entries ->
        {idx, vals} = Enum.unzip(entries)
        Nx.indexed_put(t, Nx.tensor(idx), Nx.tensor(vals, type: :bf16))
      end

      # a: row 3 wide (2^40 beside values near 1), row 7 NaN, row 11 +Inf, row 13 zeros, row 17
      # a subnormal; b: column 5 wide (2^-60), column 9 -Inf.
      a =
        random({200, 96}, :bf16, 2.0, 87)
        |> put.([
          {[3, 0], 1.099511627776e12},
          {[7, 5], :nan},
          {[11, 50], :infinity},
          {[17, 2], 1.0e-39}
        ])
        |> Nx.put_slice([13, 0], Nx.broadcast(Nx.tensor(0.0, type: :bf16), {1, 96}))

      b =
        random({96, 150}, :bf16, 2.0, 88)
        |> put.([{[4, 5], 8.673617379884035e-19}, {[90, 9], :neg_infinity}])

      tol = [rtol: 1.6e-2, atol: 1.0e-3]
      assert_device(&Nx.dot/2, [a, b], tol)
      assert_device(&Nx.dot(&1, [0], &2, [1]), [Nx.transpose(a), Nx.transpose(b)], tol)
    end

    # Few output tiles over a long K (as the large MNIST step's 512x2048x10 and its transposed
    # forms): GPUs split K into chunks, multiply them as a batch and sum the partials.
    test "skinny GEMMs with a long contraction (split-K on GPUs), f32 and s32" do
      tol = if Nx.Vulkan.stats().precise_dot, do: [rtol: 1.0e-6], else: [rtol: 1.0e-5, atol: 1.0e-3]

      assert_device(
        &Nx.dot/2,
        [random({512, 1024}, :f32, 2.0, 71), random({1024, 10}, :f32, 2.0, 72)],
        tol
      )

      h = random({512, 1024}, :f32, 2.0, 73)
      assert_device(&Nx.dot(&1, [0], &2, [0]), [h, random({512, 10}, :f32, 2.0, 74)], tol)

      assert_device(
        &Nx.dot(&1, [1], &2, [1]),
        [random({300, 1024}, :f32, 2.0, 75), random({10, 1024}, :f32, 2.0, 76)],
        tol
      )

      ints = fn shape, seed -> random(shape, :f32, 3.0, seed) |> Nx.round() |> Nx.as_type(:s32) end
      assert_device(&Nx.dot/2, [ints.({256, 2048}, 77), ints.({2048, 3}, 78)])
    end

    test "batched and multi-axis contractions" do
      a = random({2, 3, 4, 5}, :f32, 1.0, 5)
      b = random({2, 5, 4, 6}, :f32, 1.0, 6)
      assert_device(&Nx.dot(&1, [2, 3], [0], &2, [2, 1], [0]), [a, b], rtol: 1.0e-6, atol: 1.0e-6)

      assert_device(
        &Nx.dot(&1, [1], [], &2, [0], []),
        [random({3, 5}, :f32, 1.0, 7), random({5, 2}, :f32, 1.0, 8)],
        rtol: 1.0e-6,
        atol: 1.0e-6
      )
    end

    test "outer product, vectors and integers" do
      assert_device(&Nx.outer/2, [dev([1.0, 2.0, 3.0]), dev([4.0, 5.0])])
      assert_device(&Nx.dot/2, [dev([1.0, 2.0, 3.0]), dev([4.0, 5.0, 6.0])])
      assert_device(&Nx.dot/2, [dev([[1, 2], [3, 4]], type: :s32), dev([[5], [6]], type: :s32)])
    end
  end
end

defmodule Nx.Vulkan.VectorGemmTest do
  # Not async: it reads which kernels ran from the per-kernel GPU times, which are global.
  use Nx.Vulkan.DeviceCase, async: false

  # On CPU devices a GEMM of 4-byte elements whose operands line up in 16-byte vectors takes
  # gemm_rows4.comp (16 x 4 outputs an invocation, K four at a time); every other takes
  # gemm_rows.comp. Both sum each output's products in order from k = 0, so f32 under
  # precise_dot (f64 sums rounded once) and integers equal the BinaryBackend bit for bit.
  @cases [
    # {label, a shape, b shape, contraction, vector kernel on CPU devices?}
    {"A along K, B along N, ragged M", {13, 24}, {24, 20}, {[1], [0]}, true},
    {"A along M (transposed), B along N", {24, 12}, {24, 20}, {[0], [0]}, true},
    {"A along K, B along K (transposed), ragged N", {13, 24}, {18, 24}, {[1], [1]}, true},
    {"A along M, B along K", {24, 12}, {18, 24}, {[0], [1]}, true},
    {"K of 4 (not a multiple of 8)", {9, 4}, {4, 8}, {[1], [0]}, true},
    {"N over one workgroup's columns", {5, 8}, {8, 600}, {[1], [0]}, true},
    {"MNIST layer 32x784x128", {32, 784}, {784, 128}, {[1], [0]}, true},
    {"MNIST weight gradient 784x32x128", {32, 784}, {32, 128}, {[0], [0]}, true},
    {"K of 10", {8, 10}, {10, 8}, {[1], [0]}, false},
    {"A along M with ragged M", {24, 13}, {24, 20}, {[0], [0]}, false},
    {"B along N with ragged N", {8, 24}, {24, 18}, {[1], [0]}, false}
  ]

  setup do
    Nx.Vulkan.set_gpu_timing(true)
    Nx.Vulkan.take_kernel_times()
    on_exit(fn -> Nx.Vulkan.set_gpu_timing(false) end)
  end

  defp gemm_kernels do
    for {name, _} <- Nx.Vulkan.take_kernel_times(),
        String.starts_with?(Atom.to_string(name), "gemm"),
        do: Atom.to_string(name)
  end

  defp ints(shape, type, seed) do
    random(shape, :f32, 1000.0, seed) |> Nx.round() |> Nx.abs() |> Nx.as_type(type)
  end

  test "every operand layout, ragged dims, f32 s32 u32, bit for bit with the BinaryBackend" do
    cpu? = Nx.Vulkan.Device.info().type == :cpu
    exact? = Nx.Vulkan.stats().precise_dot

    for {label, sa, sb, {ca, cb}, vector?} <- @cases, type <- [:f32, :s32, :u32] do
      {a, b} =
        if type == :f32,
          do: {random(sa, :f32, 2.0, 81), random(sb, :f32, 2.0, 82)},
          else: {ints(sa, type, 83), ints(sb, type, 84)}

      tol = if type == :f32 and not exact?, do: [rtol: 1.0e-5, atol: 1.0e-3], else: []
      assert_device(&Nx.dot(&1, ca, &2, cb), [a, b], tol)
      Nx.Vulkan.flush()
      kernels = gemm_kernels()

      if cpu? do
        vector = Enum.any?(kernels, &String.starts_with?(&1, "gemm_rows4_"))
        assert vector == vector?, "#{label} #{type}: #{inspect(kernels)}"
      end
    end
  end

  # Past 2^24 outputs on the vector kernel (ragged M), and M past the 8-row blocks the device's
  # grid holds (65535 x 8), which takes gemm_rows.comp: exact integer sums, sampled positions.
  test "past 2^24 outputs, and more rows than the vector kernel's grid holds" do
    cpu? = Nx.Vulkan.Device.info().type == :cpu

    for {m, k, n, vector?} <- [{4100, 4, 4100, true}, {1_100_000, 4, 4, false}] do
      a = Nx.iota({m, k}, type: :s32, backend: Nx.Vulkan.Backend) |> Nx.remainder(7)
      b = Nx.iota({k, n}, type: :s32, backend: Nx.Vulkan.Backend) |> Nx.remainder(5)
      out = Nx.dot(a, b)
      Nx.Vulkan.flush()
      kernels = gemm_kernels()

      if cpu?,
        do: assert(Enum.any?(kernels, &(&1 == "gemm_rows4_s32")) == vector?, inspect(kernels))

      ha = Nx.backend_copy(a, Nx.BinaryBackend)
      hb = Nx.backend_copy(b, Nx.BinaryBackend)
      host = Nx.backend_copy(out, Nx.BinaryBackend)

      for p <- [0, 1, n - 1, n, div(m * n, 2) + 3, m * n - n, m * n - 1] do
        i = div(p, n)
        j = rem(p, n)

        assert Nx.to_number(host[i][j]) == Nx.to_number(Nx.dot(ha[i], hb[[.., j]])),
               "#{m}x#{k}x#{n} at #{p}"
      end
    end
  end

  test "batched, with batch strides multiples of 4 and not" do
    for {sa, sb} <- [{{3, 9, 16}, {3, 16, 12}}, {{2, 5, 8}, {2, 8, 3}}] do
      a = random(sa, :f32, 2.0, 85)
      b = random(sb, :f32, 2.0, 86)
      tol = if Nx.Vulkan.stats().precise_dot, do: [], else: [rtol: 1.0e-5, atol: 1.0e-3]
      assert_device(&Nx.dot(&1, [2], [0], &2, [1], [0]), [a, b], tol)
    end
  end
end

defmodule Nx.Vulkan.ArgReduceTest do
  use Nx.Vulkan.DeviceCase, async: true

  test "argmax and argmin with ties, NaN, axes, keep_axis and index types" do
    t = dev([[1.0, 3.0, 3.0, :nan], [2.0, 2.0, -1.0, -1.0], [:nan, 0.0, :nan, 5.0]])

    for op <- [:argmax, :argmin],
        tie <- [:low, :high],
        opts <- [[], [axis: 0], [axis: 1], [axis: 1, keep_axis: true]] do
      assert_device(&apply(Nx, op, [&1, [tie_break: tie] ++ opts]), [t])
    end

    i = dev([[3, 1, 3], [0, 7, 7]], type: :s16)

    for op <- [:argmax, :argmin], type <- [:s32, :s64, :u8] do
      assert_device(&apply(Nx, op, [&1, [axis: 1, type: type]]), [i])
    end
  end

  test "all and any, NaN counting as true" do
    t = dev([[1.0, 0.0, :nan], [2.0, 3.0, 4.0]])

    for op <- [:all, :any], opts <- [[], [axes: [0]], [axes: [1], keep_axes: true]] do
      assert_device(&apply(Nx, op, [&1, opts]), [t])
    end
  end

  test "is_nan and is_infinity" do
    t = dev([:nan, :infinity, :neg_infinity, 0.0, 1.0])
    assert_device(&Nx.is_nan/1, [t])
    assert_device(&Nx.is_infinity/1, [t])
    assert_device(&Nx.is_nan/1, [dev([1, 2], type: :s32)])
    assert_device(&Nx.is_infinity/1, [dev([1.0, :infinity], type: :f64)])
  end
end

defmodule Nx.Vulkan.WindowTest do
  use Nx.Vulkan.DeviceCase, async: true

  test "window reductions with strides, padding and dilations" do
    t = random({2, 5, 6}, :f32, 3.0, 21)

    for op <- [:window_sum, :window_max, :window_min, :window_product, :window_mean],
        opts <- [
          [],
          [strides: [1, 2, 1]],
          [padding: :same],
          [padding: [{0, 0}, {1, 2}, {2, 0}], window_dilations: [1, 2, 1]]
        ] do
      assert_device(&apply(Nx, op, [&1, {1, 2, 3}, opts]), [t], rtol: 1.0e-6, atol: 1.0e-6)
    end

    assert_device(&Nx.window_sum(&1, {2}), [dev([1, 2, 3, 4], type: :s32)])
    assert_device(&Nx.cumulative_sum/1, [dev([1.0, 2.0, 3.0, 4.0])])
  end
end

defmodule Nx.Vulkan.SortTest do
  use Nx.Vulkan.DeviceCase, async: true

  test "sort and argsort: stable, both directions, NaN ordering, any axis" do
    t = dev([[3.0, :nan, 1.0, 3.0, :neg_infinity], [0.0, -0.0, :infinity, 2.0, :nan]])

    for dir <- [:asc, :desc], axis <- [0, 1] do
      assert_device(&Nx.sort(&1, axis: axis, direction: dir), [t])
      assert_device(&Nx.argsort(&1, axis: axis, direction: dir), [t])
      assert_device(&Nx.argsort(&1, axis: axis, direction: dir, type: :s64), [t])
    end

    i = random({4, 33, 3}, :f32, 5.0, 23) |> Nx.round() |> Nx.as_type(:s16)

    for axis <- [0, 1, 2], dir <- [:asc, :desc] do
      assert_device(&Nx.sort(&1, axis: axis, direction: dir), [i])
      assert_device(&Nx.argsort(&1, axis: axis, direction: dir), [i])
    end

    assert_device(&Nx.top_k(&1, k: 2), [dev([4, 1, 9, 9, 2])])
  end

  test "long rows (the radix sort, or the bitonic network): stable, both directions, NaN, -0.0" do
    # Rows past 2048 elements (and one of 70_000, past lavapipe's loop budget for ranks) sort by
    # sort_radix.comp (scripts/test.sh's cap-4 run: by sort_bitonic.comp, NXV_RADIX_SORT=0); values
    # repeat so that stability shows, and lengths are neither powers of two nor whole tiles.
    specials =
      Nx.tensor([:nan, -0.0, 0.0, :infinity, :neg_infinity, 1.0, -1.0], backend: Nx.BinaryBackend)

    floats =
      random({3, 3001}, :f32, 8.0, 41)
      |> Nx.round()
      |> Nx.put_slice(
        [1, 100],
        Nx.reshape(specials, {1, 7}) |> Nx.backend_transfer(Nx.Vulkan.Backend)
      )

    long = random({70_000}, :f32, 1000.0, 42) |> Nx.round()

    for t <- [floats, Nx.as_type(floats, :s16), Nx.as_type(floats, :f64), long],
        dir <- [:asc, :desc] do
      axis = Nx.rank(t) - 1
      assert_device(&Nx.sort(&1, axis: axis, direction: dir), [t])
      assert_device(&Nx.argsort(&1, axis: axis, direction: dir, stable: true), [t])
    end

    # Along a non-last axis (strided rows) and with 8-byte indices.
    cols = Nx.transpose(floats)
    assert_device(&Nx.sort(&1, axis: 0), [cols])
    assert_device(&Nx.argsort(&1, axis: 0, direction: :desc, type: :s64), [cols])
    assert_device(&Nx.top_k(&1, k: 5), [long])
  end

  test "long rows of every integer type and f16: one radix pass per byte of the key" do
    u = random({2, 2500}, :f32, 300.0, 43) |> Nx.round()

    for type <- [:u8, :s8, :u16, :u32, :s32, :u64, :s64, :f16], dir <- [:asc, :desc] do
      t = if match?({:u, _}, Nx.Type.normalize!(type)), do: Nx.abs(u), else: u
      t = Nx.as_type(t, type)
      assert_device(&Nx.sort(&1, axis: 1, direction: dir), [t])
      assert_device(&Nx.argsort(&1, axis: 1, direction: dir, stable: true), [t])
    end
  end
end

defmodule Nx.Vulkan.TriangularSolveTest do
  use Nx.Vulkan.DeviceCase, async: true

  test "every combination of left_side, lower and transform_a, vectors, matrices and batches" do
    lower = dev([[2.0, 0.0, 0.0], [1.5, -3.0, 0.0], [0.5, 2.0, 4.0]])
    upper = Nx.transpose(lower)
    b_mat = random({3, 2}, :f32, 2.0, 41)
    b_right = random({2, 3}, :f32, 2.0, 42)
    b_vec = dev([1.0, -2.0, 0.5])

    for {a, lower?} <- [{lower, true}, {upper, false}], transform <- [:none, :transpose] do
      opts = [lower: lower?, transform_a: transform]
      tol = [rtol: 1.0e-6, atol: 1.0e-6]
      assert_device(&Nx.LinAlg.triangular_solve(&1, &2, opts), [a, b_mat], tol)
      assert_device(&Nx.LinAlg.triangular_solve(&1, &2, opts), [a, b_vec], tol)

      assert_device(
        &Nx.LinAlg.triangular_solve(&1, &2, [left_side: false] ++ opts),
        [a, b_right],
        tol
      )
    end

    batched = Nx.stack([lower, Nx.multiply(lower, 2.0)])

    assert_device(&Nx.LinAlg.triangular_solve/2, [batched, Nx.stack([b_mat, b_mat])],
      rtol: 1.0e-6,
      atol: 1.0e-6
    )
  end

  # At the read of the result (a deferred check), or at the call in immediate mode.
  test "a singular matrix raises as on the BinaryBackend" do
    a = dev([[1.0, 0.0], [1.0, 0.0]])
    x = Nx.LinAlg.triangular_solve(a, dev([1.0, 2.0]))
    assert_raise ArgumentError, "can't solve for singular matrix", fn -> Nx.to_binary(x) end

    previous = Nx.Vulkan.put_check_mode(:immediate)

    try do
      assert_raise ArgumentError, "can't solve for singular matrix", fn ->
        Nx.LinAlg.triangular_solve(a, dev([1.0, 2.0]))
      end
    after
      Nx.Vulkan.put_check_mode(previous)
    end
  end
end

defmodule Nx.Vulkan.ConvTest do
  use Nx.Vulkan.DeviceCase, async: true

  @tol [rtol: 1.0e-5, atol: 1.0e-5]

  test "2-D conv with strides, padding, dilations and feature groups" do
    x = random({2, 4, 7, 6}, :f32, 1.0, 51)
    k = random({6, 2, 3, 2}, :f32, 1.0, 52)

    for opts <- [
          [feature_group_size: 2],
          [feature_group_size: 2, strides: [2, 1], padding: :same],
          [
            feature_group_size: 2,
            padding: [{1, 2}, {0, 1}],
            kernel_dilation: [2, 1],
            input_dilation: [1, 2]
          ]
        ] do
      assert_device(&Nx.conv(&1, &2, opts), [x, k], @tol)
    end

    assert_device(
      &Nx.conv(&1, &2, strides: 2),
      [random({1, 3, 9, 9}, :f32, 1.0, 53), random({5, 3, 3, 3}, :f32, 1.0, 54)],
      @tol
    )
  end

  test "1-D and 3-D conv, permutations, f64" do
    assert_device(
      &Nx.conv/2,
      [random({2, 3, 10}, :f64, 1.0, 55), random({4, 3, 3}, :f64, 1.0, 56)],
      @tol
    )

    assert_device(
      &Nx.conv/2,
      [random({1, 2, 4, 5, 3}, :f32, 1.0, 57), random({3, 2, 2, 2, 2}, :f32, 1.0, 58)],
      @tol
    )

    nhwc = random({2, 6, 6, 3}, :f32, 1.0, 59)
    hwio = random({3, 3, 3, 4}, :f32, 1.0, 60)

    opts = [
      input_permutation: [0, 3, 1, 2],
      kernel_permutation: [3, 2, 0, 1],
      output_permutation: [0, 3, 1, 2]
    ]

    assert_device(&Nx.conv(&1, &2, opts), [nhwc, hwio], @tol)
  end
end

# The implicit-GEMM conv kernel (GPUs' default for 2-D f32/f16 convs), forced on here so CPU
# devices check it too: windows read in place, padding and strides as bounds, NCHW stores, f32
# accumulation in (kh, kw, channel) order. Not async: the policy is global.
defmodule Nx.Vulkan.ImplicitConvTest do
  use Nx.Vulkan.DeviceCase, async: false

  setup do
    previous = Nx.Vulkan.Device.implicit_conv?()
    Nx.Vulkan.Device.put_implicit_conv(true)
    on_exit(fn -> Nx.Vulkan.Device.put_implicit_conv(previous) end)
  end

  # Sums of up to 150 products of terms below 1 in f32: a few f32 roundings of partial sums.
  @tol [rtol: 1.0e-5, atol: 1.0e-4]

  defp kernels_run(fun) do
    Nx.Vulkan.set_gpu_timing(true)
    Nx.Vulkan.take_kernel_times()

    try do
      result = fun.()
      Nx.Vulkan.flush()
      {result, Nx.Vulkan.take_kernel_times() |> Enum.map(&elem(&1, 0))}
    after
      Nx.Vulkan.set_gpu_timing(false)
    end
  end

  test "strides, padding (negative too), dilations, groups, permutations, ragged blocks" do
    cases = [
      {{2, 3, 9, 11}, {64, 3, 3, 3}, []},
      {{2, 8, 10, 10}, {64, 8, 3, 3}, [padding: :same]},
      {{2, 8, 10, 10}, {64, 8, 3, 3},
       [padding: [{1, 2}, {0, 1}], strides: [2, 1], kernel_dilation: [1, 2]]},
      {{1, 16, 12, 12}, {128, 8, 3, 3}, [feature_group_size: 2, padding: :same]},
      {{3, 4, 7, 7}, {70, 4, 2, 2}, [padding: [{-1, 1}, {2, 0}], strides: [1, 3]]},
      {{2, 130, 5, 6}, {150, 130, 1, 1}, []},
      # channels a multiple of the 16-wide K tile: the per-tile (kh, kw) walk
      {{2, 32, 9, 9}, {64, 32, 3, 3}, [padding: :same, strides: 2]},
      {{1, 48, 6, 7}, {96, 16, 2, 3}, [feature_group_size: 3, kernel_dilation: [2, 1]]},
      {{2, 8, 8, 6}, {33, 6, 3, 3},
       [input_permutation: [0, 3, 1, 2], output_permutation: [0, 3, 1, 2]]}
    ]

    for {{x_shape, k_shape, opts}, i} <- Enum.with_index(cases) do
      x = random(x_shape, :f32, 1.0, 70 + i)
      k = random(k_shape, :f32, 1.0, 80 + i)
      {_, names} = kernels_run(fn -> assert_device(&Nx.conv(&1, &2, opts), [x, k], @tol) end)
      assert :gemm_conv_f32 in names, "#{inspect(opts)} ran #{inspect(names)}"
    end
  end

  # Past 2^24 outputs (17.1 M, 68 MB, under lavapipe's 128 MiB binding): integer-valued
  # operands, so the implicit kernel and the im2col path must agree bit for bit.
  test "over 2^24 outputs, padded and strided, the same as im2col" do
    x = random({1, 2, 730, 730}, :f32, 4.0, 96) |> Nx.round()
    k = random({32, 2, 2, 2}, :f32, 4.0, 97) |> Nx.round()
    conv = fn -> Nx.conv(x, k, padding: [{1, 1}, {0, 1}], kernel_dilation: [1, 2]) end
    {implicit, names} = kernels_run(conv)
    assert :gemm_conv_f32 in names
    assert Nx.size(implicit) > 2 ** 24
    Nx.Vulkan.Device.put_implicit_conv(false)
    {patches, names} = kernels_run(conv)
    refute :gemm_conv_f32 in names
    assert Nx.to_binary(implicit) == Nx.to_binary(patches)
    Nx.Vulkan.Device.put_implicit_conv(true)
  end

  test "128-feature blocks, f16, and what stays on im2col" do
    # 2 x 128 x 128 outputs of 128 features: 256 blocks of 128 x 128 (gemm_tiled's TM = 8),
    # too many products for the BinaryBackend here: against the im2col path of this device.
    x = random({2, 8, 130, 130}, :f32, 1.0, 90)
    k = random({128, 8, 3, 3}, :f32, 1.0, 91)
    {implicit, names} = kernels_run(fn -> Nx.conv(x, k, padding: [{0, 1}, {1, 0}]) end)
    assert :gemm_conv8_f32 in names
    Nx.Vulkan.Device.put_implicit_conv(false)
    {patches, names} = kernels_run(fn -> Nx.conv(x, k, padding: [{0, 1}, {1, 0}]) end)
    refute :gemm_conv8_f32 in names
    assert Nx.all_close(implicit, patches, rtol: 1.0e-5, atol: 1.0e-4) |> Nx.to_number() == 1
    Nx.Vulkan.Device.put_implicit_conv(true)

    x16 = random({2, 8, 10, 10}, :f16, 1.0, 92)
    k16 = random({64, 8, 3, 3}, :f16, 1.0, 93)

    {_, names} =
      kernels_run(fn -> assert_device(&Nx.conv/2, [x16, k16], rtol: 2.0e-3, atol: 2.0e-2) end)

    assert :gemm_conv_f16 in names

    # Depthwise (one feature per group) and input dilation keep the patches and the GEMM.
    dw = random({2, 8, 6, 6}, :f32, 1.0, 94)

    {_, names} =
      kernels_run(fn ->
        assert_device(
          &Nx.conv(&1, &2, feature_group_size: 8),
          [dw, random({8, 1, 3, 3}, :f32, 1.0, 95)],
          @tol
        )
      end)

    refute Enum.any?(names, &(&1 in [:gemm_conv_f32, :gemm_conv8_f32]))
  end
end

defmodule Nx.Vulkan.WindowScatterTest do
  use Nx.Vulkan.DeviceCase, async: true

  test "window_scatter_max/min with ties, strides and padding" do
    t =
      dev([[7, 2, 5, 3, 10, 2], [3, 8, 9, 3, 4, 2], [1, 5, 7, 5, 6, 1], [0, 6, 2, 7, 2, 8]],
        type: :f32
      )

    src = dev([[2, 6], [3, 1]], type: :f32)

    for op <- [:window_scatter_max, :window_scatter_min] do
      assert_device(&apply(Nx, op, [&1, &2, &3, {2, 3}, [strides: [2, 3]]]), [t, src, dev(0.0)])
    end

    ties = dev([[1, 1, 1], [1, 1, 1], [1, 1, 1]], type: :f32)

    for op <- [:window_scatter_max, :window_scatter_min] do
      assert_device(&apply(Nx, op, [&1, &2, &3, {2, 2}, [strides: [1, 1]]]), [
        ties,
        dev([[1.0, 2.0], [3.0, 4.0]]),
        dev(0.5)
      ])

      assert_device(&apply(Nx, op, [&1, &2, &3, {2, 2}, [strides: [2, 2], padding: :same]]), [
        ties,
        dev([[1.0, 2.0], [3.0, 4.0]]),
        dev(0.0)
      ])
    end
  end
end
