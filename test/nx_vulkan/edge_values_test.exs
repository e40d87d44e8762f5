defmodule Nx.Vulkan.EdgeValuesTest do
  # Non-finite complex parts, NaNs made by arithmetic and the types without device kernels:
  # the answers the BinaryBackend gives, bit for bit, and never a bare error.
  use Nx.Vulkan.DeviceCase, async: true

  defp same_bits(fun, values, type) do
    host = fun.(Nx.tensor(values, type: type, backend: Nx.BinaryBackend))
    device = fun.(dev(values, type: type))
    assert %Nx.Vulkan.Backend{} = device.data

    assert Nx.to_binary(device) == Nx.to_binary(host),
           "#{inspect(Nx.to_flat_list(device))} (expected #{inspect(Nx.to_flat_list(host))})"
  end

  for type <- [:c64, :c128] do
    test "complex functions with infinite parts follow the complex library, #{type}" do
      inf = :infinity

      z = [
        Complex.new(inf, 3.0),
        Complex.new(4.0, 0.0),
        Complex.new(4.0, -0.0),
        Complex.new(-4.0, 0.0),
        Complex.new(:neg_infinity, -2.0),
        Complex.new(inf, inf),
        Complex.new(1.0, :nan),
        Complex.new(-0.0, 2.0)
      ]

      for fun <- [&Nx.acosh/1, &Nx.asinh/1, &Nx.rsqrt/1, &Nx.sqrt/1, &Nx.log/1] do
        same_bits(fun, z, unquote(type))
      end

      same_bits(&Nx.product/1, [Complex.new(inf, 3.0), Complex.new(-2.0, 4.0)], unquote(type))

      same_bits(
        &Nx.product(&1, axes: [1]),
        [
          [Complex.new(1.0, -0.0), Complex.new(2.0, 1.0)],
          [Complex.new(inf, 0.0), Complex.new(3.0, 0.0)]
        ],
        unquote(type)
      )

      assert Nx.Vulkan.Fallback.tagged(Process.get(:nx_vulkan_fallback_tag)) == 0
    end
  end

  for type <- [:f32, :f64, :f16, :bf16] do
    test "NaNs from arithmetic are the positive quiet NaN, #{type}" do
      same_bits(&Nx.add(&1, Nx.negate(&1)), [:infinity, 1.0], unquote(type))
      same_bits(&Nx.multiply(&1, 0.0), [:infinity, :neg_infinity], unquote(type))
      # The BinaryBackend raises for sqrt(-1); the device answers NaN, written as Nx writes :nan.
      nan = Nx.Type.nan_binary(Nx.Type.normalize!(unquote(type)))
      assert Nx.to_binary(Nx.sqrt(dev([-1.0, -2.5], type: unquote(type)))) == nan <> nan
    end
  end

  for type <- [:f8, :f8_e4m3fn, :s2, :s4, :u2, :u4] do
    test "#{type} computes through the counted host fallback, with a reason" do
      type = unquote(type)
      before = Nx.Vulkan.Fallback.tagged(Process.get(:nx_vulkan_fallback_tag))

      values =
        if elem(Nx.Type.normalize!(type), 0) in [:s, :u], do: [1, 0, 1], else: [1.0, 2.0, -1.5]

      t = dev(values, type: type)
      h = Nx.tensor(values, type: type, backend: Nx.BinaryBackend)

      for fun <- [&Nx.exp/1, &Nx.add(&1, 1), &Nx.sum/1, &Nx.negate/1, &Nx.as_type(&1, :f32)] do
        result = fun.(t)
        assert %Nx.Vulkan.Backend{} = result.data
        assert Nx.to_binary(result) == Nx.to_binary(fun.(h))
      end

      assert Nx.to_binary(Nx.iota({5}, type: type)) ==
               Nx.to_binary(Nx.iota({5}, type: type, backend: Nx.BinaryBackend))

      assert Nx.Vulkan.Fallback.tagged(Process.get(:nx_vulkan_fallback_tag)) > before

      assert Enum.any?(Nx.Vulkan.Fallback.reasons(), fn {_op, reason} ->
               is_binary(reason) and reason != ""
             end)
    end
  end
end
