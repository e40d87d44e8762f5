defmodule Nx.Vulkan.ErrorsTest do
  use Nx.Vulkan.DeviceCase, async: true
  alias Nx.Vulkan.Native

  test "mismatched shapes are an ArgumentError from the NIF, not a crash" do
    a = dev([1.0, 2.0, 3.0])

    assert_raise ArgumentError, ~r/cannot broadcast/, fn ->
      Native.binary_op(:add, {:f, 32}, a.data.ref, [3], a.data.ref, [5], [5]) |> Native.unwrap!()
    end
  end

  test "reads beyond a buffer are refused" do
    a = dev([1.0, 2.0, 3.0])

    assert_raise ArgumentError, ~r/outside a buffer of 3 elements/, fn ->
      Native.view_copy(4, a.data.ref, 0, [10], [1]) |> Native.unwrap!()
    end

    assert_raise ArgumentError, ~r/outside a buffer/, fn ->
      Native.view_copy(4, a.data.ref, 0, [2], [-1]) |> Native.unwrap!()
    end
  end

  test "bad arguments to a NIF raise ArgumentError" do
    assert_raise ArgumentError, fn -> Native.unary_op(:exp, {:f, 32}, :not_a_buffer, 3) end
    assert_raise ArgumentError, fn -> Native.unary_op("exp", :f32, dev([1.0]).data.ref, 1) end
    assert_raise ArgumentError, fn -> Native.set_batch_max(-5) |> Native.unwrap!() end
  end

  test "device errors are Nx.Vulkan.Error" do
    assert_raise Nx.Vulkan.Error, "boom", fn -> Native.unwrap!({:error, {:vulkan, "boom"}}) end
  end

  test "backend options are validated wherever Nx passes them" do
    %{index: active} = Nx.Vulkan.Device.info()
    assert Nx.Vulkan.Backend.init(device: active) == [device: active]
    assert Nx.Vulkan.Backend.init([]) == []

    assert_raise ArgumentError, ~r/unknown keys \[:bogus\]/, fn ->
      Nx.default_backend({Nx.Vulkan.Backend, bogus: 1})
    end

    # Only this VM's devices are valid; the message lists them.
    devices = Enum.map_join(Nx.Vulkan.devices(), ", ", &"#{&1.index} (#{&1.name})")

    for bad <- [99, -1, length(Nx.Vulkan.devices()), "#{active}", active * 1.0, nil, :gpu] do
      message =
        "Nx.Vulkan.Backend's :device must be the index of one of this VM's devices: " <>
          "#{devices} (NXV_LOGICAL_DEVICES=n opens n logical devices on the default one); " <>
          "got: #{inspect(bad)}"

      assert_raise ArgumentError, message, fn ->
        Nx.default_backend({Nx.Vulkan.Backend, device: bad})
      end

      assert_raise ArgumentError, message, fn ->
        Nx.backend_copy(dev([1.0]), {Nx.Vulkan.Backend, device: bad})
      end

      assert_raise ArgumentError, message, fn ->
        Nx.Defn.jit(&Nx.exp/1, compiler: Nx.Vulkan, device: bad).(dev([1.0]))
      end
    end

    # Creation functions hand the options to the backend without init/1: checked there as well.
    assert_raise ArgumentError, ~r/:device must be the index of one of .*got: 3$/, fn ->
      Nx.tensor([1.0, 2.0], backend: {Nx.Vulkan.Backend, device: 3})
    end

    assert_raise ArgumentError, ~r/:device must be the index of one of .*got: 3$/, fn ->
      Nx.tensor(1.0, backend: {Nx.Vulkan.Backend, device: 3})
    end

    assert_raise ArgumentError, ~r/unknown keys \[:client\]/, fn ->
      Nx.iota({3}, backend: {Nx.Vulkan.Backend, client: :cuda})
    end

    assert_raise ArgumentError, ~r/unknown keys/, fn ->
      Nx.eye(2, backend: {Nx.Vulkan.Backend, bogus: 1})
    end

    t = Nx.tensor([1.0, 2.0], backend: {Nx.Vulkan.Backend, device: active})
    assert Nx.to_flat_list(t) == [1.0, 2.0]
  end

  test "Device.info/1 opens a listed device and names the devices for any other index" do
    %{index: active} = Nx.Vulkan.Device.info()
    assert Nx.Vulkan.Device.info(active).name == Nx.Vulkan.Device.info().name

    assert_raise ArgumentError, ~r/no Vulkan device has index 99; this VM's devices are 0/, fn ->
      Nx.Vulkan.Device.info(99)
    end
  end

  test "an inspect limit beyond the tensor is clamped before the NIF" do
    t = dev([1.0, 2.0])
    assert inspect(t, limit: 2 ** 70) == inspect(t, limit: :infinity)
    assert Nx.to_binary(t, limit: 2 ** 70) == Nx.to_binary(t)
  end

  test "device list and memory figures" do
    [first | _] = devices = Nx.Vulkan.devices()
    assert Enum.any?(devices, &(&1.index == Nx.Vulkan.Device.info().index))
    assert is_binary(first.name) and is_atom(first.type)
    %{live: live, peak: peak, pooled: pooled} = Nx.Vulkan.memory()
    assert live >= 0 and peak >= live and pooled >= 0
  end

  test "device info and class" do
    info = Nx.Vulkan.Device.info()
    assert is_binary(info.name) and info.subgroup_size >= 1 and info.max_push_constants >= 128
    assert is_boolean(info.subgroup_ballot)
    assert Nx.Vulkan.Device.class() in [:software, :discrete_large, :discrete, :integrated, :other]
    assert Nx.Vulkan.Device.derive_class(%{type: :cpu}) == :software

    big = %{
      type: :discrete_gpu,
      subgroup_size: 32,
      memory_heaps: [%{size: 141 * 1024 ** 3, device_local: true}]
    }

    assert Nx.Vulkan.Device.derive_class(big) == :discrete_large
    assert Nx.Vulkan.Device.derive_class(%{big | subgroup_size: 16}) == :discrete
  end

  test "a tensor too large for one storage binding is a clear error" do
    limit = Nx.Vulkan.Device.info().max_storage_buffer_range

    assert_raise ArgumentError, ~r/exceeds this device's maxStorageBufferRange/, fn ->
      Native.alloc_buffer(limit + 4, 0) |> Native.unwrap!()
    end
  end
end

defmodule Nx.Vulkan.NoDeviceTest do
  use ExUnit.Case, async: true
  @moduletag :subprocess

  test "without a Vulkan device the application stops with a clear message" do
    {output, status} =
      System.cmd("mix", ["run", "--no-compile", "--no-deps-check", "-e", "IO.puts(:started)"],
        env: [
          {"VK_ICD_FILENAMES", "/nonexistent/icd.json"},
          {"VK_DRIVER_FILES", "/nonexistent/icd.json"},
          {"MIX_ENV", "test"}
        ],
        stderr_to_stdout: true
      )

    assert status != 0
    assert output =~ "Nx.Vulkan.Error"
    assert output =~ ~r/no usable Vulkan driver|no Vulkan device with a compute queue/
    refute output =~ "started"
  end

  # Like NXV_BATCH_MAX, a bad NXV_HOST_FALLBACK stops the start instead of the first fallback.
  test "bad settings stop the application at start, naming the variable" do
    for {name, value, message} <- [
          {"NXV_HOST_FALLBACK", "bogus",
           ~s|NXV_HOST_FALLBACK must be one of allow, warn, raise; got: "bogus"|},
          {"NXV_ELEMENTS_PER_INVOCATION", "3",
           ~s|NXV_ELEMENTS_PER_INVOCATION must be 1, 2, 4, 8 or 16, got: "3"|},
          {"NXV_WORKGROUP_SIZE", "100",
           ~s|NXV_WORKGROUP_SIZE must be 32, 64, 128 or 256, got: "100"|},
          {"NXV_GEMM_COOP", "128x512",
           ~s|NXV_GEMM_COOP must be 0, 1 or one of 128x128, 128x128/2, 128x256, got: "128x512"|},
          {"NXV_DRIVER_NICE", "20", ~s|NXV_DRIVER_NICE must be an integer from 0 to 19, got: "20"|},
          {"NXV_SPIN_US", "-1", ~s|NXV_SPIN_US must be a number of microseconds, got: "-1"|},
          {"NXV_BATCH_MAX", "#{2 ** 64}",
           ~s|NXV_BATCH_MAX must be an integer from 0 to 2 ** 63 - 1 (0 = submit every op on its own), got: "#{2 ** 64}"|}
        ] do
      {output, status} =
        System.cmd("mix", ["run", "--no-compile", "--no-deps-check", "-e", "IO.puts(:started)"],
          env: [{name, value}, {"MIX_ENV", "test"}],
          stderr_to_stdout: true
        )

      assert status != 0
      assert output =~ "Could not start application nx_vulkan"
      assert output =~ "(ArgumentError) " <> message
      refute output =~ "started\n"
    end

    {output, 0} =
      System.cmd("mix", ["run", "--no-compile", "--no-deps-check", "-e", "IO.puts(:started)"],
        env: [{"NXV_HOST_FALLBACK", "warn"}, {"MIX_ENV", "test"}],
        stderr_to_stdout: true
      )

    assert output =~ "started"
  end

  # The BinaryBackend raises for these; the device does too instead of making up a value. A
  # constant operand raises at the call; a tensor one at the next read of the result (deferred
  # check), or at the call in immediate mode.
  test "integer division by zero, negative exponents and negative shifts raise" do
    a = Nx.tensor([7, -8, 9], type: :s32, backend: Nx.Vulkan.Backend)
    zero = Nx.tensor([1, 0, 2], type: :s32, backend: Nx.Vulkan.Backend)

    quotient = Nx.quotient(a, zero)

    assert_raise ArithmeticError, "integer quotient by zero (a divisor is 0)", fn ->
      Nx.to_binary(quotient)
    end

    # Every read raises again, and so does a read of anything computed from the result.
    assert_raise ArithmeticError, ~r/integer quotient by zero/, fn -> Nx.to_number(quotient[1]) end

    assert_raise ArithmeticError, ~r/integer quotient by zero/, fn ->
      Nx.to_list(Nx.add(quotient, a))
    end

    assert_raise ArithmeticError, ~r/integer remainder by zero/, fn -> Nx.remainder(a, 0) end

    assert_raise ArithmeticError, "integer pow with a negative exponent (-1)", fn ->
      Nx.pow(a, Nx.tensor([2, -1, 0], backend: Nx.Vulkan.Backend)) |> Nx.to_binary()
    end

    assert_raise ArgumentError, "cannot left shift by -3", fn -> Nx.left_shift(a, -3) end

    assert_raise ArgumentError, "cannot right shift by -2", fn ->
      Nx.right_shift(a, Nx.tensor([1, -2, 0], backend: Nx.Vulkan.Backend)) |> Nx.to_binary()
    end

    for type <- [:s8, :s16, :s64] do
      assert_raise ArgumentError, "cannot left shift by -128", fn ->
        Nx.left_shift(
          Nx.as_type(a, type),
          Nx.tensor([0, -128, 1], type: type, backend: Nx.Vulkan.Backend)
        )
        |> Nx.to_binary()
      end
    end

    # The first failed check, in the order the ops ran, is the one reported.
    shifted = Nx.right_shift(a, Nx.tensor([0, -5, 0], backend: Nx.Vulkan.Backend))

    assert_raise ArgumentError, "cannot right shift by -5", fn ->
      Nx.quotient(shifted, zero) |> Nx.to_binary()
    end

    # Immediate mode raises at the call, as the BinaryBackend does.
    previous = Nx.Vulkan.put_check_mode(:immediate)

    try do
      assert Nx.Vulkan.check_mode() == :immediate
      assert_raise ArithmeticError, ~r/integer quotient by zero/, fn -> Nx.quotient(a, zero) end

      assert Nx.to_flat_list(Nx.quotient(a, Nx.tensor([7, 2, 3], backend: Nx.Vulkan.Backend))) == [
               1,
               -4,
               3
             ]
    after
      Nx.Vulkan.put_check_mode(previous)
    end

    assert_raise ArgumentError, ~r/takes :deferred or :immediate/, fn ->
      Nx.Vulkan.put_check_mode(:later)
    end

    # Unsigned operands are never negative; valid ones run as before, their checks clean.
    assert Nx.to_flat_list(Nx.quotient(a, 2)) == [3, -4, 4]

    assert Nx.to_flat_list(Nx.quotient(a, Nx.tensor([2, 2, -2], backend: Nx.Vulkan.Backend))) == [
             3,
             -4,
             -4
           ]

    assert Nx.to_flat_list(
             Nx.left_shift(Nx.tensor([1, 2], type: :u8, backend: Nx.Vulkan.Backend), 3)
           ) == [8, 16]

    # Floats divide by zero as IEEE 754 says.
    assert Nx.to_flat_list(Nx.divide(Nx.tensor([1.0, -1.0], backend: Nx.Vulkan.Backend), 0.0)) == [
             :infinity,
             :neg_infinity
           ]
  end
end

defmodule Nx.Vulkan.DeviceClassEnvTest do
  # Not async: it sets an OS environment variable of the VM, which the child VMs that async
  # tests start would inherit (one such child once failed to start on this test's bad value).
  use ExUnit.Case, async: false

  test "NXV_DEVICE_CLASS is validated" do
    System.put_env("NXV_DEVICE_CLASS", "quantum")

    assert_raise ArgumentError, ~r/NXV_DEVICE_CLASS must be one of/, fn ->
      Nx.Vulkan.Device.class()
    end

    System.put_env("NXV_DEVICE_CLASS", "discrete")
    assert Nx.Vulkan.Device.class() == :discrete
  after
    System.delete_env("NXV_DEVICE_CLASS")
  end
end
