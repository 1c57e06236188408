from shop import compute_total


def test_empty():
    assert compute_total([]) == 0


def test_sum():
    assert compute_total([1, 2]) == 3


if __name__ == '__main__':
    test_empty()
    test_sum()
    print('2 passed')
