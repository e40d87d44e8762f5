# Run by test/nx_vulkan/gpu_variants_test.exs in a child VM started with NXV_DEVICE_CLASS set to
# a GPU class, so that a CPU device takes the GPU kernel variants: the register-blocked GEMMs
# (NXV_GEMM_BLOCK picks one, or the shape does) and the implicit-GEMM conv. Integer-valued
# operands keep every sum exact, so each result must equal the BinaryBackend's bit for bit.
# Prints one line per case and "variants: N mismatches".
Nx.global_default_backend(Nx.Vulkan.Backend)
Nx.Vulkan.set_gpu_timing(true)

ints = fn shape, seed, type ->
  {t, _} = Nx.Random.randint(Nx.Random.key(seed), -8, 8, shape: shape, type: :s32)
  Nx.as_type(t, type)
end

run = fn label, f, args ->
  host = Enum.map(args, &Nx.backend_copy(&1, Nx.BinaryBackend))
  ref = Nx.with_default_backend(Nx.BinaryBackend, fn -> apply(f, host) end)
  got = apply(f, args) |> Nx.backend_copy(Nx.BinaryBackend)

  kernels =
    for {name, _} <- Nx.Vulkan.take_kernel_times(),
        String.starts_with?(Atom.to_string(name), "gemm"),
        do: name

  same = Nx.to_binary(ref) == Nx.to_binary(got) and ref.shape == got.shape
  IO.puts("#{label}: #{if same, do: "equal", else: "MISMATCH"} #{inspect(kernels)}")
  if same, do: 0, else: 1
end

gemms = [
  {"gemm 520x37x590", {520, 37}, {37, 590}, &Nx.dot/2},
  {"gemm a^T b^T 520x37x590", {37, 520}, {590, 37}, &Nx.dot(&1, [0], &2, [1])},
  {"gemm 1100x5x1030", {1100, 5}, {5, 1030}, &Nx.dot/2},
  {"gemm batched 4x200x19x300", {4, 200, 19}, {4, 19, 300}, &Nx.dot(&1, [2], [0], &2, [1], [0])},
  # Few tiles over a short K: the 16x16-tile kernel (gemm.comp).
  {"gemm skinny short K 32x100x20", {32, 100}, {100, 20}, &Nx.dot/2},
  # Few tiles over a long K: sixteen slices of each workgroup walk K (gemm_ksplit).
  {"gemm skinny 32x784x128", {32, 784}, {784, 128}, &Nx.dot/2},
  {"gemm skinny ragged a^T 20x300x30", {300, 20}, {300, 30}, &Nx.dot(&1, [0], &2, [0])}
]

convs = [
  {"conv 64->64 3x3 same", {2, 16, 12, 12}, {64, 16, 3, 3}, [padding: :same]},
  {"conv 3->70 strided, dilated, padded", {2, 3, 15, 13}, {70, 3, 3, 2},
   [strides: [2, 1], kernel_dilation: [1, 2], padding: [{2, -1}, {1, 1}]]},
  {"conv 2 groups of 128", {1, 16, 18, 18}, {256, 8, 2, 2}, [feature_group_size: 2]}
]

# With a forced GEMM block only the GEMMs (the conv kernels do not depend on it).
convs = if System.get_env("NXV_GEMM_BLOCK") in [nil, ""], do: convs, else: []

bad =
  for(
    {label, a, b, f} <- gemms,
    type <- [:f32, :s32],
    do: run.("#{label} #{type}", f, [ints.(a, 1, type), ints.(b, 2, type)])
  ) ++
    for(
      {label, x, k, opts} <- convs,
      do: run.(label, &Nx.conv(&1, &2, opts), [ints.(x, 3, :f32), ints.(k, 4, :f32)])
    )

# Compiled programs on a GPU: pre-recorded (arguments and results copied by copy_multi.comp)
# while the copies are small, recorded again at every call once the arguments are large (one
# function, two sizes); bit for bit the Evaluator's either way. Rows and columns of 160 and 256
# elements fold more than a merged stage may (fuse.rs merge), so the reductions keep their own
# kernels and the program stays long enough to pre-record.
compiled = fn label, f, args, prerecorded ->
  info = Nx.Vulkan.program_info(f, args)

  expected =
    apply(Nx.Defn.jit(f), args)
    |> List.wrap()
    |> Nx.Defn.Composite.flatten_list()
    |> Enum.map(&Nx.to_binary/1)

  got =
    apply(Nx.Defn.jit(f, compiler: Nx.Vulkan), args)
    |> List.wrap()
    |> Nx.Defn.Composite.flatten_list()
    |> Enum.map(&Nx.to_binary/1)

  same = expected == got and info.prerecorded == prerecorded
  IO.puts("#{label}: #{if same, do: "equal", else: "MISMATCH"} prerecorded #{info.prerecorded}")
  if same, do: 0, else: 1
end

reductions = fn x ->
  {Nx.sum(x, axes: [1]), Nx.sum(x, axes: [0]), Nx.reduce_max(x, axes: [1]),
   Nx.reduce_min(x, axes: [0]), Nx.sum(x)}
end

bad =
  bad ++
    [
      compiled.("program, small arguments", reductions, [ints.({256, 160}, 5, :f32)], true),
      compiled.("program, a 32 MiB argument", reductions, [ints.({4096, 2048}, 6, :f32)], false)
    ]

# Slices and put_slices with tensor starts computed on the device (indexing a vector of them):
# copy.comp's STARTS variant up to 4 starts and rank 4, dynamic_offset.comp first past that,
# both with the GPU's division-free index decoding. Starts clamp at both ends.
dynamic = [
  {"dynamic slice rank 3 strided", {9, 8, 7}, [2, -3, 5], [4, 5, 3], [2, 1, 2]},
  {"dynamic slice rank 6", {3, 2, 4, 3, 2, 5}, [1, 0, 9, 1, -1, 2], [2, 1, 2, 2, 1, 3],
   [1, 1, 1, 1, 1, 2]}
]

bad =
  bad ++
    for {label, shape, starts, lengths, strides} <- dynamic do
      slice_put = fn t, starts ->
        starts = for i <- 0..(length(lengths) - 1), do: starts[i]
        piece = Nx.slice(t, starts, lengths, strides: strides)
        {piece, Nx.put_slice(t, starts, Nx.add(Nx.slice(t, starts, lengths), 1))}
      end

      run.(
        label,
        &(slice_put.(&1, &2)
          |> Tuple.to_list()
          |> Enum.map(fn x -> Nx.flatten(x) end)
          |> Nx.concatenate()),
        [ints.(shape, 7, :f32), Nx.tensor(starts, type: :s32)]
      )
    end

# Each f32 GEMM variant with an epilogue (fuse.rs): a bias, a relu and a sigmoid computed where
# the GEMM stores each result, bit for bit the Evaluator's (which runs them as kernels of their
# own); the GEMM's own result returned too. `with_epilogue` compiles `layer` and compares it
# with the Evaluator, bit for bit, and asks `fused?` of the program's kernels.
with_epilogue = fn label, layer, args, fused? ->
  info = Nx.Vulkan.program_info(layer, args)

  flat = fn t ->
    t |> List.wrap() |> Nx.Defn.Composite.flatten_list() |> Enum.map(&Nx.to_binary/1)
  end

  same =
    flat.(apply(Nx.Defn.jit(layer), args)) ==
      flat.(apply(Nx.Defn.jit(layer, compiler: Nx.Vulkan), args))

  ok = same and fused?.(info.kernels)
  IO.puts("epilogue #{label}: #{if ok, do: "equal", else: "MISMATCH"} #{inspect(info.kernels)}")
  if ok, do: 0, else: 1
end

# A split-K GEMM (a sum of partial products) keeps its ops unfused.
gemm_fused? = fn kernels ->
  "fused_gemm" in kernels or Enum.any?(kernels, &String.starts_with?(&1, "reduce"))
end

bad =
  bad ++
    for {label, a, b, f} <- gemms do
      dense = fn x, w, bias ->
        y = f.(x, w)
        {y, Nx.add(y, bias) |> Nx.max(0), Nx.sigmoid(y) |> Nx.multiply(bias)}
      end

      {x, w} = {ints.(a, 7, :f32), ints.(b, 8, :f32)}
      out = f.(x, w).shape

      with_epilogue.(
        label,
        dense,
        [x, w, ints.({elem(out, tuple_size(out) - 1)}, 9, :f32)],
        gemm_fused?
      )
    end

# The implicit-GEMM conv with its bias and activation (NCHW: the bias along the feature axis).
bad =
  bad ++
    for {label, xs, ks, opts} <- convs do
      layer = fn x, k, bias ->
        Nx.conv(x, k, opts) |> Nx.add(Nx.reshape(bias, {1, :auto, 1, 1})) |> Nx.max(0)
      end

      args = [ints.(xs, 10, :f32), ints.(ks, 11, :f32), ints.({elem(ks, 0)}, 12, :f32)]
      with_epilogue.(label, layer, args, &("fused_gemm" in &1))
    end

# Rows past 2048 elements sort by the radix sort (sort_radix.comp: its subgroup ballots and
# shared-memory tile sort), or with NXV_RADIX_SORT=0 by the bitonic network, whose passes of
# distances below 1024 run in shared memory on GPUs, a dispatch per block size. Quotients of
# small integers give ties (argsort is stable), -0.0, +-Inf and NaN; values and indices, both
# directions, along either axis, bit for bit the BinaryBackend's. A 70_000-element f32 row takes
# 12 dispatches by radix (4 passes of 3) and 26 by the bitonic network (a 2^17-slot row: a
# load, 24 of passes, a store; 155 with one per pass).
quotients = fn shape, seed ->
  Nx.divide(ints.(shape, seed, :f32), ints.(shape, seed + 1, :f32))
end

sorts = [
  {"sort 3x5000", {3, 5000}, &Nx.sort(&1, axis: 1)},
  {"argsort 3x5000 desc", {3, 5000}, &Nx.argsort(&1, axis: 1, direction: :desc)},
  {"argsort 4100x2 along axis 0", {4100, 2}, &Nx.argsort(&1, axis: 0)},
  {"sort 70000 desc", {70_000}, &Nx.sort(&1, direction: :desc)}
]

bad =
  bad ++
    for {{label, shape, f}, seed} <- Enum.with_index(sorts, 20) do
      run.(label, f, [quotients.(shape, 2 * seed)])
    end

long_row = quotients.({70_000}, 90)
Nx.Vulkan.flush()
recorded = Nx.Vulkan.stats().recorded
_ = Nx.argsort(long_row)
Nx.Vulkan.flush()
sort_dispatches = Nx.Vulkan.stats().recorded - recorded
IO.puts("argsort 70000 dispatches: #{sort_dispatches}")
expected_dispatches = if System.get_env("NXV_RADIX_SORT") == "0", do: 26, else: 12
bad = if sort_dispatches == expected_dispatches, do: bad, else: bad ++ [1]

stats = Nx.Vulkan.stats()

IO.puts(
  "variants: #{Enum.sum(bad)} mismatches (spin_us #{stats.spin_us}, submit_programs #{stats.submit_programs})"
)
