# Run by test/nx_vulkan/multi_device_test.exs in a child VM started with NXV_LOGICAL_DEVICES=3:
# three logical devices on this machine's one Vulkan device, each with its own context, queue, GPU
# thread, buffer pool and pipelines, so every multi-device path runs without several GPUs.
# An ExUnit suite of its own; the parent checks its summary line.
# Also runs as a plain `elixir` script with the apps on ERL_LIBS (the H200 host has no Mix).
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
ExUnit.start(autorun: false, seed: 0, timeout: 240_000)

defmodule Nx.Vulkan.MultiDeviceTest do
  use ExUnit.Case
  alias Nx.Vulkan.Backend, as: B

  @devices [0, 1, 2]

  defp on(device, data, opts \\ []),
    do: Nx.tensor(data, Keyword.put(opts, :backend, {B, device: device}))

  defp to(t, device), do: Nx.backend_copy(t, {B, device: device})
  defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)
  defp bits(t), do: {t.shape, t.type, Nx.to_binary(t)}

  defp random(shape, seed, type \\ :f32) do
    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      {t, _} = Nx.Random.uniform(Nx.Random.key(seed), -2.0, 2.0, shape: shape, type: type)
      t
    end)
  end

  # Commands the device's GPU thread has recorded (after a flush of everything pending).
  defp recorded(device) do
    Nx.Vulkan.flush()
    Nx.Vulkan.stats(device).recorded
  end

  test "the VM has three logical devices, each opened with its own context" do
    assert Enum.map(Nx.Vulkan.devices(), & &1.index) == @devices
    assert Nx.Vulkan.Device.info().index == 0

    for d <- @devices do
      assert Nx.Vulkan.Device.info(d).index == d
      t = on(d, [1.0, 2.0])
      assert B.device_of(t) == d
      assert Nx.Vulkan.stats(d).device == d
    end

    assert_raise ArgumentError, ~r/one of this VM's devices: 0 .*, 1 .*, 2 .*got: 3$/, fn ->
      Nx.tensor(1.0, backend: {B, device: 3})
    end
  end

  # A mix of kernel families: GEMM, conv, reductions, sort, gather, dynamic slicing, scans,
  # windows, casts, selects, integer ops and a host fallback.
  defp workload(x, w, k, i) do
    y = x |> Nx.dot(w) |> Nx.exp() |> Nx.divide(10.0)
    conv = Nx.conv(Nx.reshape(x, {1, 1, 8, 12}), k, padding: :same)
    start = Nx.remainder(Nx.sum(i), 4)

    {
      Nx.sum(y, axes: [1]),
      Nx.sort(Nx.flatten(y), direction: :desc),
      Nx.argmax(y, axis: 0),
      Nx.take(y, Nx.remainder(i, 8), axis: 0),
      Nx.slice(y, [start, 0], [2, 5]),
      Nx.put_slice(y, [start, 1], Nx.broadcast(0.5, {1, 2})),
      Nx.cumulative_sum(y, axis: 1),
      Nx.window_max(y, {2, 2}),
      Nx.as_type(y, :f16),
      Nx.select(Nx.greater(y, 0.3), y, -1.0),
      Nx.quotient(Nx.multiply(i, 7), Nx.add(i, 1)),
      conv,
      Nx.concatenate([y, Nx.negate(y)], axis: 1),
      Nx.LinAlg.determinant(Nx.slice(y, [0, 0], [3, 3]))
    }
  end

  test "ops run on their tensors' device, bit for bit as on the default device" do
    x = random({8, 12}, 1)
    w = random({12, 5}, 2)
    k = random({1, 1, 3, 3}, 3)
    i = Nx.tensor([3, 1, 4, 1, 5, 9, 2, 6], type: :s32, backend: Nx.BinaryBackend)
    on_host = Nx.with_default_backend(Nx.BinaryBackend, fn -> workload(x, w, k, i) end)

    results =
      for d <- @devices do
        before = recorded(d)
        result = workload(to(x, d), to(w, d), to(k, d), to(i, d))

        for t <- Tuple.to_list(result) do
          assert %B{} = t.data
          assert B.device_of(t) == d
        end

        assert recorded(d) > before
        Enum.map(Tuple.to_list(result), &bits/1)
      end

    assert Enum.uniq(results) |> length() == 1

    # And against the BinaryBackend (sums are tree-ordered here: close, not bit-equal).
    for {got, want} <-
          Enum.zip(
            Tuple.to_list(workload(to(x, 2), to(w, 2), to(k, 2), to(i, 2))),
            Tuple.to_list(on_host)
          ) do
      assert got.shape == want.shape and got.type == want.type
      assert Nx.all_close(host(got), want, atol: 1.0e-3, rtol: 1.0e-3) |> Nx.to_number() == 1
    end
  end

  test "tensors of two devices in one op raise naming both; numbers and host tensors follow" do
    a = on(1, [1.0, 2.0])
    b = on(2, [3.0, 4.0])

    assert_raise ArgumentError, ~r/tensors on Vulkan devices 1 and 2: move one with/, fn ->
      Nx.add(a, b)
    end

    assert_raise ArgumentError, ~r/devices 2 and 1/, fn -> Nx.dot(b, a) end

    # Numbers become constants on the default device (0) and follow the op's other tensors.
    sum = Nx.add(a, 1.5)
    assert B.device_of(sum) == 1 and Nx.to_flat_list(sum) == [2.5, 3.5]
    clipped = b |> Nx.clip(3.5, 10.0) |> Nx.select(1.0, 0.0) |> Nx.pad(7.0, [{1, 1, 0}])
    assert B.device_of(clipped) == 2 and Nx.to_flat_list(clipped) == [7.0, 1.0, 1.0, 7.0]
    padded = Nx.pad(b, Nx.tensor(5.0, backend: Nx.BinaryBackend), [{0, 1, 0}])
    assert B.device_of(padded) == 2 and Nx.to_flat_list(padded) == [3.0, 4.0, 5.0]
    put = Nx.put_slice(b, [1], Nx.broadcast(9.0, {1}))
    assert B.device_of(put) == 2 and Nx.to_flat_list(put) == [3.0, 9.0]

    # A tensor of another backend goes to the device of the process's default backend.
    host = Nx.tensor([2.0, 2.0], backend: Nx.BinaryBackend)
    assert_raise ArgumentError, ~r/devices 0 and 2/, fn -> Nx.multiply(host, b) end

    Nx.with_default_backend({B, device: 2}, fn ->
      product = Nx.multiply(host, b)
      assert B.device_of(product) == 2 and Nx.to_flat_list(product) == [6.0, 8.0]
    end)

    # With the process's default backend on a device, its constants are made there.
    Nx.with_default_backend({B, device: 2}, fn ->
      c = Nx.tensor(10.0)
      assert B.device_of(c) == 2
      assert Nx.to_flat_list(Nx.subtract(b, c)) == [-7.0, -6.0]
    end)
  end

  test "backend_transfer and backend_copy move tensors between devices" do
    a = on(0, [[1, 2], [3, 4]], type: :s64)
    copy = Nx.backend_copy(a, {B, device: 2})
    assert B.device_of(copy) == 2 and B.device_of(a) == 0
    assert Nx.to_binary(copy) == Nx.to_binary(a)

    moved = Nx.backend_transfer(a, {B, device: 1})
    assert B.device_of(moved) == 1
    assert Nx.to_list(moved) == [[1, 2], [3, 4]]
    # Transferred away, the source is freed.
    assert_raise ArgumentError, ~r/deallocated/, fn -> Nx.to_binary(a) end

    # To the same device, a transfer is the tensor itself.
    assert Nx.backend_transfer(moved, {B, device: 1}) == moved

    # A deferred check (integer division by zero) raises at the read the transfer makes.
    zero = on(1, [0, 1], type: :s32)
    q = Nx.quotient(on(1, [4, 4], type: :s32), zero)

    assert_raise ArithmeticError, fn -> Nx.backend_transfer(q, {B, device: 2}) end
  end

  test "stats and memory are per device" do
    Nx.Vulkan.flush()
    before = Map.new(@devices, &{&1, Nx.Vulkan.stats(&1)})
    keep = on(2, Enum.to_list(1..1000), type: :f32) |> Nx.exp()
    Nx.to_binary(keep)
    after_ = Map.new(@devices, &{&1, Nx.Vulkan.stats(&1)})

    assert after_[2].recorded > before[2].recorded
    assert after_[0].recorded == before[0].recorded
    assert after_[1].recorded == before[1].recorded
    assert after_[2].host_syncs.download == before[2].host_syncs.download + 1
    assert Nx.Vulkan.memory(2).live >= 4000
    assert Nx.Vulkan.memory(1).live < Nx.Vulkan.memory(2).live
  end

  test "devices work in parallel: one process per device, each gets its own results" do
    x = random({64, 64}, 9)
    want = x |> Nx.dot(x) |> Nx.sum() |> Nx.to_number()

    results =
      @devices
      |> Enum.map(fn d ->
        Task.async(fn ->
          Nx.default_backend({B, device: d})
          xd = to(x, d)

          for _ <- 1..20 do
            r = xd |> Nx.dot(xd) |> Nx.sum()
            {B.device_of(r), Nx.to_number(r)}
          end
        end)
      end)
      |> Task.await_many(240_000)

    for {per_device, d} <- Enum.zip(results, @devices), {device, value} <- per_device do
      assert device == d
      assert_in_delta value, want, abs(want) * 1.0e-5
    end
  end

  test "the compiler runs a function on the device asked for; arguments elsewhere move there" do
    f = fn x, w -> x |> Nx.dot(w) |> Nx.add(1.0) |> Nx.max(0.0) |> Nx.sum(axes: [0]) end
    x = random({16, 32}, 4)
    w = random({32, 8}, 5)
    want = Nx.Defn.jit(f).(to(x, 0), to(w, 0))
    census = Nx.Vulkan.compiler_census()

    for d <- @devices do
      got = Nx.Defn.jit(f, compiler: Nx.Vulkan, device: d).(to(x, d), to(w, d))
      assert B.device_of(got) == d
      assert bits(got) == bits(want)
      # Arguments on another device (and on the host) are copied to the program's.
      other = rem(d + 1, 3)
      moved = Nx.Defn.jit(f, compiler: Nx.Vulkan, device: d).(to(x, other), host(w))
      assert B.device_of(moved) == d
      assert bits(moved) == bits(want)
    end

    after_ = Nx.Vulkan.compiler_census()
    assert after_.programs == census.programs + 3
    assert after_.evaluator == census.evaluator

    assert Nx.Vulkan.__partitions_options__(compiler: Nx.Vulkan) ==
             Enum.map(@devices, &[device: &1, compiler: Nx.Vulkan])

    assert Nx.Vulkan.__partitions_options__(device: 1) == [[device: 1]]
    assert Nx.Vulkan.__partitions_options__(devices: [2, 0]) == [[device: 2], [device: 0]]
    assert Nx.Vulkan.__to_backend__(device: 2) == {B, [device: 2]}
  end

  test "Nx.Serving with partitions: true runs a partition on every device" do
    model = fn x -> x |> Nx.multiply(2.0) |> Nx.exp() |> Nx.sum(axes: [1]) end

    serving =
      Nx.Serving.new(fn opts -> Nx.Defn.jit(model, opts) end, compiler: Nx.Vulkan)
      |> Nx.Serving.batch_size(4)

    name = __MODULE__.Serving

    {:ok, _} =
      Nx.Serving.start_link(serving: serving, name: name, partitions: true, batch_timeout: 2)

    before = Map.new(@devices, &{&1, recorded(&1)})
    input = fn i -> Nx.iota({16}, type: :f32, backend: Nx.BinaryBackend) |> Nx.multiply(i / 100) end

    results =
      1..96
      |> Enum.map(fn i ->
        Task.async(fn -> Nx.Serving.batched_run(name, Nx.Batch.stack([input.(i)])) |> host() end)
      end)
      |> Task.await_many(240_000)

    for {got, i} <- Enum.zip(results, 1..96) do
      want = Nx.with_default_backend(Nx.BinaryBackend, fn -> model.(Nx.new_axis(input.(i), 0)) end)
      assert Nx.all_close(got, want, rtol: 1.0e-5) |> Nx.to_number() == 1
    end

    for d <- @devices, do: assert(recorded(d) > before[d], "device #{d} ran no batch")
  end
end

result = ExUnit.run()
System.halt(if result.failures == 0, do: 0, else: 1)
