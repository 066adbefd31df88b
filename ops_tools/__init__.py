"""Operations suite of the NET public test network."""

__version__ = "0.1.0"
