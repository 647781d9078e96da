// Compile-only stand-in (see CurrencyUnit.java).
package javax.money;

public final class Monetary {
    private Monetary() {
    }

    public static CurrencyUnit getCurrency(String code) {
        throw new UnsupportedOperationException("compile-only stub");
    }
}
