// Compile-only stand-in (see javax/money/CurrencyUnit.java).
package org.javamoney.moneta;

import java.math.BigDecimal;
import javax.money.CurrencyUnit;

public final class Money {
    private Money() {
    }

    public static Money of(Number amount, CurrencyUnit currency) {
        throw new UnsupportedOperationException("compile-only stub");
    }

    public BigDecimal getNumberStripped() {
        throw new UnsupportedOperationException("compile-only stub");
    }

    public CurrencyUnit getCurrency() {
        throw new UnsupportedOperationException("compile-only stub");
    }
}
