Code.require_file("../../examples/mnist_mlp.exs", __DIR__)

defmodule Nx.Vulkan.HostSyncTest.Defns do
  import Nx.Defn

  # Dynamic slice + put_slice with tensor starts computed on the device from the loop counter:
  # some starts fall outside the tensor (negative, or past dim - length) and clamp.
  defn slice_loop(t, acc, n) do
    {_, acc, _, _} =
      while {t, acc, i = 0, n}, i < n do
        row = Nx.remainder(i * 5, 13) - 4
        col = Nx.as_type(Nx.remainder(i * 3, 9), :u8)
        piece = Nx.slice(t, [row, col], [2, 3])
        acc = Nx.put_slice(acc, [Nx.as_type(row + 1, :s16), 2], piece * 2 + i)
        {t, acc, i + 1, n}
      end

    acc
  end

  defn(draw(key), do: Nx.Random.uniform(key, shape: {100}))

  defn(divide(a, b), do: Nx.quotient(a, b) + 1)

  # A dropout-style training step: a random mask on the hidden layer, the loss and its gradient.
  defn dropout_step(w, x, key) do
    value_and_grad(w, fn w ->
      h = Nx.dot(x, w)
      {mask, _key} = Nx.Random.uniform(key, shape: Nx.shape(h))
      h = Nx.select(mask > 0.5, h / 0.5, 0.0)
      Nx.mean(h * h)
    end)
  end
end

defmodule Nx.Vulkan.HostSyncTest do
  # Not async: host_syncs are global counters, and the tests change the batch cap.
  use Nx.Vulkan.DeviceCase, async: false
  alias Nx.Vulkan.HostSyncTest.Defns

  setup :keep_batch_max

  # The host syncs `fun` causes, by reason (only the nonzero ones), and its result.
  defp syncs(fun) do
    before = Nx.Vulkan.stats().host_syncs
    result = fun.()
    after_run = Nx.Vulkan.stats().host_syncs

    delta =
      for {reason, n} <- after_run, n != before[reason], into: %{}, do: {reason, n - before[reason]}

    {result, delta}
  end

  # Runs `fun` at caps 0, 4 and 64: the results (binaries) and the host syncs must be the same.
  defp across_caps(fun) do
    runs =
      for cap <- [0, 4, 64] do
        Nx.Vulkan.set_batch_max(cap)
        syncs(fun)
      end

    assert length(Enum.uniq(runs)) == 1, "results or host syncs differ across batch caps"
    hd(runs)
  end

  defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

  # A scalar start computed on the device: Nx.tensor/2 of a number makes a constant, whose value
  # the backend knows and folds into a static offset.
  defp device_start(value, type, backend) do
    Nx.iota({1}, type: type, backend: backend)
    |> Nx.add(Nx.tensor(value, type: type, backend: backend))
    |> Nx.reshape({})
  end

  # Whether a read of `bytes` bytes copies them straight from the tensor's memory (no staging
  # copy, so no submission when the result is already complete).
  defp read_in_place?(bytes) do
    case Nx.Vulkan.Device.info().direct_read_bytes do
      :infinity -> true
      limit -> bytes <= limit
    end
  end

  # Start values per type: in range, negative (clamp to 0), past the end (clamp to dim - length),
  # and beyond 32 bits for the 64-bit types.
  defp start_values({:u, 8}), do: [0, 3, 255]
  defp start_values({:u, 64}), do: [1, 2 ** 63 + 5, 2 ** 40]
  defp start_values({:u, _}), do: [2, 4, 65_535]
  defp start_values({:s, 64}), do: [-2 ** 40, 3, 2 ** 40, -1]
  defp start_values({:s, _}), do: [-7, 1, 4, 100]

  @start_types [{:s, 8}, {:s, 16}, {:s, 32}, {:s, 64}, {:u, 8}, {:u, 16}, {:u, 32}, {:u, 64}]

  # The eager loop: slice then put_slice, with tensor starts of one type mixed with an integer;
  # `backend` says where the start tensors live.
  defp eager_loop(t, acc, backend) do
    for type <- @start_types, value <- start_values(type), reduce: acc do
      acc ->
        start = device_start(value, type, backend)
        other = device_start(rem(value, 3), type, backend)
        piece = Nx.slice(t, [start, 1, other], [2, 3, 2])
        piece = Nx.slice(t, [1, start, 0], [2, 3, 2]) |> Nx.add(piece)
        Nx.put_slice(acc, [other, start, 2], piece)
    end
  end

  test "eager dynamic slice + put_slice: every start type, clamped starts, one sync at the read" do
    t = Nx.iota({5, 6, 4}, type: :f32, backend: Nx.Vulkan.Backend)
    acc = Nx.broadcast(Nx.tensor(-1.0, backend: Nx.Vulkan.Backend), {4, 7, 5})

    expected =
      Nx.with_default_backend(Nx.BinaryBackend, fn ->
        eager_loop(host(t), host(acc), Nx.BinaryBackend)
      end)

    {binary, syncs} =
      across_caps(fn -> eager_loop(t, acc, Nx.Vulkan.Backend) |> Nx.to_binary() end)

    assert binary == Nx.to_binary(expected)
    assert syncs == %{download: 1}
    assert Nx.Vulkan.Fallback.tagged(Process.get(:nx_vulkan_fallback_tag)) == 0
  end

  test "dynamic starts in every element width and in c128 match the BinaryBackend" do
    for type <- [:u8, :s16, :f32, :f64, :c64, :c128] do
      t = Nx.iota({4, 5}, type: type, backend: Nx.Vulkan.Backend)
      start = device_start(3, :s32, Nx.Vulkan.Backend)
      slice = Nx.slice(t, [start, start], [2, 2])
      put = Nx.put_slice(t, [1, start], Nx.multiply(slice, 2))

      Nx.with_default_backend(Nx.BinaryBackend, fn ->
        th = host(t)

        assert Nx.to_binary(slice) ==
                 Nx.to_binary(Nx.slice(th, [Nx.tensor(3), Nx.tensor(3)], [2, 2]))

        hs = Nx.slice(th, [Nx.tensor(3), Nx.tensor(3)], [2, 2])

        assert Nx.to_binary(put) ==
                 Nx.to_binary(Nx.put_slice(th, [1, Nx.tensor(3)], Nx.multiply(hs, 2)))
      end)
    end
  end

  # Up to 4 tensor starts over a copy of collapsed rank up to 4 take one dispatch that clamps the
  # starts itself (copy.comp's STARTS variant); more starts, or a higher rank, compute the offset
  # in a dispatch of its own first (dynamic_offset.comp). Both against the BinaryBackend, in every
  # element width, read and written, strided, with starts that clamp at both ends.
  test "tensor starts in one dispatch up to 4 starts and rank 4, in two past that" do
    cases = [
      # {shape, slice lengths, strides, kernel the starts take}
      {{6, 7}, [3, 4], [1, 1], :fused},
      {{3, 4, 5, 6}, [2, 2, 3, 2], [1, 2, 3, 1], :fused},
      {{3, 3, 4, 3, 5}, [2, 1, 2, 2, 3], [1, 1, 1, 1, 1], :offset},
      {{2, 3, 2, 3, 2, 4}, [1, 2, 1, 2, 2, 3], [1, 1, 1, 1, 1, 1], :offset}
    ]

    Nx.Vulkan.set_gpu_timing(true)

    try do
      for {shape, lengths, strides, path} <- cases, type <- [:u8, :s16, :f32, :s64, :c128] do
        rank = tuple_size(shape)
        t = Nx.iota(shape, type: type, backend: Nx.Vulkan.Backend)
        # Starts below 0 and past the end clamp; one integer start where the rank allows.
        values = Enum.map(0..(rank - 1), &Enum.at([-2, 1, 9, 0, 2, 5], &1))
        start_types = [:s32, :u8, :s64, :s16, :u16, :u32]

        starts = fn backend ->
          for {v, i} <- Enum.with_index(values) do
            if i == 1 and path == :fused and rank > 2,
              do: 1,
              else: device_start(v, Enum.at(start_types, i), backend)
          end
        end

        Nx.Vulkan.take_kernel_times()
        slice = Nx.slice(t, starts.(Nx.Vulkan.Backend), lengths, strides: strides)
        put = Nx.put_slice(t, starts.(Nx.Vulkan.Backend), Nx.add(slice, 1))
        {slice_bin, put_bin} = {Nx.to_binary(slice), Nx.to_binary(put)}
        kernels = Nx.Vulkan.take_kernel_times() |> Map.keys() |> Enum.map(&Atom.to_string/1)

        case path do
          :fused -> refute "dynamic_offset" in kernels, inspect({shape, type, kernels})
          :offset -> assert "dynamic_offset" in kernels, inspect({shape, type, kernels})
        end

        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          th = host(t)
          hs = Nx.slice(th, starts.(Nx.BinaryBackend), lengths, strides: strides)
          assert slice_bin == Nx.to_binary(hs), inspect({shape, type})
          hp = Nx.put_slice(th, starts.(Nx.BinaryBackend), Nx.add(hs, 1))
          assert put_bin == Nx.to_binary(hp), inspect({shape, type})
        end)
      end
    after
      Nx.Vulkan.set_gpu_timing(false)
    end
  end

  test "strided slices with tensor starts" do
    t = Nx.iota({7, 9}, type: :s32, backend: Nx.Vulkan.Backend)

    for {r, c} <- [{0, 0}, {2, 5}, {-4, 30}] do
      starts = [device_start(r, :s32, Nx.Vulkan.Backend), device_start(c, :s32, Nx.Vulkan.Backend)]
      actual = Nx.slice(t, starts, [4, 5], strides: [2, 3])

      expected =
        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          Nx.slice(host(t), [Nx.tensor(r), Nx.tensor(c)], [4, 5], strides: [2, 3])
        end)

      assert Nx.to_binary(actual) == Nx.to_binary(expected)
    end
  end

  test "a read of a complete result takes its bytes in place where the host can: no copy, no sync" do
    for {shape, type} <- [
          {{}, :f32},
          {{7}, :s64},
          {{64}, :f32},
          {{65}, :f32},
          {{1024, 1024}, :f32},
          {{3, 5}, :u8}
        ] do
      size = Nx.size(shape)

      expected =
        Nx.iota(shape, type: type, backend: Nx.BinaryBackend) |> Nx.multiply(3) |> Nx.subtract(size)

      t =
        Nx.iota(shape, type: type, backend: Nx.Vulkan.Backend)
        |> Nx.multiply(3)
        |> Nx.subtract(size)

      bytes = Nx.byte_size(expected)
      # The first read waits for the ops (one sync either way).
      {first, first_syncs} = syncs(fn -> Nx.to_binary(t) end)
      assert first == Nx.to_binary(expected)
      assert first_syncs == %{download: 1}
      # The second finds the result complete: read in place, nothing is recorded or submitted.
      s0 = Nx.Vulkan.stats()
      {second, syncs} = syncs(fn -> Nx.to_binary(t) end)
      s1 = Nx.Vulkan.stats()
      assert second == first

      if read_in_place?(bytes) do
        assert {syncs, s1.recorded - s0.recorded, s1.submissions - s0.submissions} == {%{}, 0, 0}
      else
        assert {syncs, s1.recorded - s0.recorded, s1.submissions - s0.submissions} ==
                 {%{download: 1}, 1, 1}
      end
    end

    # A CPU device reads any size in place; a GPU only small results (uncached bus reads).
    if Nx.Vulkan.Device.info().type == :cpu, do: assert(read_in_place?(4 * 1024 * 1024))
  end

  test "a defn while loop of dynamic slices: only the Evaluator's condition reads and the final read" do
    n = 25
    t = Nx.iota({9, 8}, type: :f32, backend: Nx.Vulkan.Backend)
    acc = Nx.broadcast(Nx.tensor(0.0, backend: Nx.Vulkan.Backend), {6, 7})
    loop = Nx.Defn.jit(&Defns.slice_loop/3)

    expected =
      Nx.with_default_backend(Nx.BinaryBackend, fn -> loop.(host(t), host(acc), n) end)

    {binary, syncs} = across_caps(fn -> loop.(t, acc, n) |> Nx.to_binary() end)
    assert binary == Nx.to_binary(expected)
    # The Evaluator reads the condition n + 1 times (Nx.to_number in its while/5); the backend
    # itself reads nothing until the result is read. The last condition read waited for the
    # result too, so where the host reads a tensor's memory directly (a CPU device; a GPU's small
    # results) the final read waits for nothing; a staging copy (a GPU's larger results) is one
    # more submission.
    assert Map.delete(syncs, :download) == %{defn_control: n + 1}
    assert Map.get(syncs, :download, 0) == if(read_in_place?(6 * 7 * 4), do: 0, else: 1)
  end

  test "compiler: Nx.Vulkan: the while loop of dynamic slices is a device loop, one sync at the read" do
    n = 600
    t = Nx.iota({9, 8}, type: :f32, backend: Nx.Vulkan.Backend)
    acc = Nx.broadcast(Nx.tensor(0.0, backend: Nx.Vulkan.Backend), {6, 7})
    compiled = Nx.Defn.jit(&Defns.slice_loop/3, compiler: Nx.Vulkan)

    expected =
      Nx.with_default_backend(Nx.BinaryBackend, fn ->
        Nx.Defn.jit(&Defns.slice_loop/3).(host(t), host(acc), n)
      end)

    # The first call builds the program.
    compiled.(t, acc, n) |> Nx.to_binary()
    before = Nx.Vulkan.stats()
    {binary, syncs} = across_caps(fn -> compiled.(t, acc, n) |> Nx.to_binary() end)
    now = Nx.Vulkan.stats()
    assert binary == Nx.to_binary(expected)
    # No condition read by the caller: the GPU thread reads it between chunks of iterations
    # (sized by how long they take, so their count depends on the host).
    assert syncs == %{download: 1}
    chunks = now.loop_chunks - before.loop_chunks
    assert chunks >= 3 and chunks <= 3 * (n + 1)
    assert now.loop_iterations - before.loop_iterations >= 3 * n
  end

  test "Nx.Random inside defn: the backend reads nothing before the result" do
    key = Nx.Random.key(42) |> Nx.backend_transfer(Nx.Vulkan.Backend)
    draw = Nx.Defn.jit(&Defns.draw/1)

    {expected, _} =
      Nx.with_default_backend(Nx.BinaryBackend, fn -> draw.(host(key)) end)

    {binary, syncs} =
      across_caps(fn ->
        {values, _key} = draw.(key)
        Nx.to_binary(values)
      end)

    assert binary == Nx.to_binary(expected)
    # Nx.Random's threefry runs `while` loops: the Evaluator reads their conditions (62 reads
    # with Nx 0.13). The backend reads nothing but the result.
    assert syncs.defn_control > 0
    assert Map.delete(syncs, :defn_control) == %{download: 1}
  end

  test "compiler: Nx.Vulkan: a dropout training step (Nx.Random's loops unrolled) syncs only at the read" do
    w = Nx.iota({16, 8}, type: :f32) |> Nx.divide(128)
    x = Nx.iota({4, 16}, type: :f32) |> Nx.divide(64)
    key = Nx.Random.key(7) |> Nx.backend_transfer(Nx.Vulkan.Backend)
    compiled = Nx.Defn.jit(&Defns.dropout_step/3, compiler: Nx.Vulkan)
    {expected_loss, expected_grad} = Nx.Defn.jit(&Defns.dropout_step/3).(w, x, key)
    # The first call builds the program (its capture reads the loops' folded counters).
    compiled.(w, x, key)

    {bits, syncs} =
      across_caps(fn ->
        {loss, grad} = compiled.(w, x, key)
        {Nx.to_binary(loss), Nx.to_binary(grad)}
      end)

    assert bits == {Nx.to_binary(expected_loss), Nx.to_binary(expected_grad)}
    # No `while` condition read per call: the Evaluator's 60-odd of the same step are gone. The
    # second read (the gradient) finds its result complete: no sync where it is read in place.
    assert syncs == %{download: if(read_in_place?(16 * 8 * 4), do: 1, else: 2)}
    assert %{dispatches: _} = Nx.Vulkan.program_info(&Defns.dropout_step/3, [w, x, key])
  end

  test "integer division by a tensor: checked on the device, raised at the read" do
    a = Nx.tensor([7, -8, 9, 100], type: :s32, backend: Nx.Vulkan.Backend)
    good = Nx.tensor([2, 3, -4, 7], type: :s32, backend: Nx.Vulkan.Backend)
    bad = Nx.tensor([2, 0, -4, 7], type: :s32, backend: Nx.Vulkan.Backend)
    divide = Nx.Defn.jit(&Defns.divide/2)

    expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> divide.(host(a), host(good)) end)
    {binary, syncs} = across_caps(fn -> divide.(a, good) |> Nx.to_binary() end)
    assert binary == Nx.to_binary(expected)
    # The check's flag is read in the same submission as the data.
    assert syncs == %{download: 1}

    {result, syncs} = syncs(fn -> divide.(a, bad) end)
    assert syncs == %{}

    {_, syncs} =
      syncs(fn ->
        assert_raise ArithmeticError, "integer quotient by zero (a divisor is 0)", fn ->
          Nx.to_binary(result)
        end
      end)

    assert syncs == %{download: 1}

    # Eager, unsigned too.
    {quotient, syncs} =
      syncs(fn -> Nx.quotient(Nx.as_type(a, :u16), Nx.as_type(bad, :u16)) end)

    assert syncs == %{}

    assert_raise ArithmeticError, ~r/integer quotient by zero/, fn ->
      Nx.to_number(Nx.sum(quotient))
    end
  end

  test "the MNIST step syncs once per step, at the loss read" do
    {params, x, labels} = MNISTMLP.inputs({32, 784, 128, 10}, Nx.Vulkan.Backend)
    step = Nx.Defn.jit(&MNISTMLP.step/3)
    sgd = Nx.Defn.jit(&MNISTMLP.sgd/3)

    {_, syncs} =
      syncs(fn ->
        Enum.reduce(1..3, params, fn _, params ->
          {loss, grads} = step.(params, x, labels)
          assert is_float(Nx.to_number(loss))
          sgd.(params, grads, 0.1)
        end)
      end)

    assert syncs == %{download: 3}
  end

  test "explicit flushes count, and only when there is work to wait for" do
    Nx.Vulkan.flush()
    {_, syncs} = syncs(fn -> Nx.Vulkan.flush() end)
    assert syncs == %{}

    {_, syncs} =
      syncs(fn ->
        Nx.add(Nx.tensor([1.0], backend: Nx.Vulkan.Backend), 1.0)
        Nx.Vulkan.flush()
      end)

    assert syncs == %{explicit_flush: 1}
  end
end
