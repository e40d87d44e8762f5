defmodule Nx.Vulkan.FallbackTest do
  # Not async: these tests read the global census and change global configuration.
  use Nx.Vulkan.DeviceCase, async: false
  import ExUnit.CaptureLog
  alias Nx.Vulkan.Fallback

  setup do
    Fallback.reset()
    on_exit(fn -> Application.put_env(:nx_vulkan, :host_fallback, :allow) end)
    :ok
  end

  # Nx.reduce with a function that needs host numbers (Nx.to_number) cannot run on vectorized
  # device tensors, so the host runs it: it stands for any op that falls back.
  @reason "the reduction function does not take vectorized tensors"
  defp host_sum(t, opts \\ []),
    do: Nx.reduce(t, 0, opts, fn x, acc -> Nx.add(Nx.to_number(x), acc) |> Nx.as_type(x.type) end)

  test "an op without a kernel runs on the host, returns to the device and is counted" do
    t = random({3, 4}, :f64, 0.9, 1)
    result = assert_device(&host_sum(&1, axes: [1]), [t], fallback: true)
    assert %Nx.Vulkan.Backend{} = result.data
    assert Fallback.count() == %{reduce: 1}
    assert Fallback.reasons() == %{reduce: @reason}

    # The next op runs on the device again: no fallback contagion.
    assert_device(&Nx.add(&1, 1.0), [result])
    assert Fallback.count() == %{reduce: 1}
  end

  test "ops on dtypes without kernels fall back with the dtype in the reason" do
    result = Nx.add(dev([1, -2, 3], type: :s4), dev([3, 4, -5], type: :s4))
    assert Nx.to_flat_list(result) == [4, 2, -2]
    assert Fallback.count() == %{add: 1}

    assert Fallback.reasons().add ==
             "add on sub-byte and 8-bit float types has no device kernel yet"
  end

  test "reset clears the census" do
    _ = host_sum(dev([1.0]))
    assert Fallback.count() != %{}
    Fallback.reset()
    assert Fallback.count() == %{}
  end

  test "strict mode :raise names the op and the reason" do
    Application.put_env(:nx_vulkan, :host_fallback, :raise)
    error = assert_raise Nx.Vulkan.Error, fn -> host_sum(dev([1.0])) end

    assert error.message ==
             "reduce would fall back to the host (#{@reason}); host_fallback is :raise"

    assert Fallback.count() == %{}
    # Ops with kernels are unaffected.
    assert Nx.to_flat_list(Nx.exp(dev([0.0]))) == [1.0]
  end

  test "strict mode :warn logs and still computes" do
    Application.put_env(:nx_vulkan, :host_fallback, :warn)
    log = capture_log(fn -> assert Nx.to_number(host_sum(dev([2.0, 3.0]))) == 5.0 end)
    assert log =~ "nx_vulkan: reduce falls back to the host: #{@reason}"
    assert Fallback.count() == %{reduce: 1}
  end

  test "NXV_HOST_FALLBACK overrides the config, a process mode overrides both" do
    Application.put_env(:nx_vulkan, :host_fallback, :allow)
    System.put_env("NXV_HOST_FALLBACK", "raise")
    assert Fallback.mode() == :raise
    Fallback.put_process_mode(:warn)
    assert Fallback.mode() == :warn
    Fallback.put_process_mode(nil)
    System.put_env("NXV_HOST_FALLBACK", "sometimes")

    assert_raise ArgumentError, ~r/NXV_HOST_FALLBACK must be one of allow, warn, raise/, fn ->
      Fallback.mode()
    end
  after
    System.delete_env("NXV_HOST_FALLBACK")
  end

  test "an invalid config value is an error" do
    Application.put_env(:nx_vulkan, :host_fallback, :loud)

    assert_raise ArgumentError, ~r/host_fallback must be one of/, fn ->
      host_sum(dev([1.0]))
    end
  end

  test "reduce inside defn runs on the host (the Evaluator's closure calls callbacks directly)" do
    t = dev([1, 2, 3, 4])
    result = Nx.Defn.jit(fn t -> Nx.reduce(t, 0, &Nx.add/2) end).(t)
    assert Nx.to_number(result) == 10
    assert %Nx.Vulkan.Backend{} = result.data
    assert Fallback.count() == %{reduce: 1}
    assert Fallback.reasons().reduce =~ "compiled by Nx.Defn"
  end

  test "reduce and window_reduce folds longer than the limit run on the host" do
    t = dev(Enum.to_list(1..300))
    assert Nx.to_number(Nx.reduce(t, 0, &Nx.add/2)) == 45150

    assert Fallback.reasons().reduce ==
             "a fold of 300 steps (more than 256, each a dispatch or more)"
  end
end
