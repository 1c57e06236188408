from rate import charge

got = charge(10)
if got != 30:
    print(f'assert {got} == 30')
    raise SystemExit(1)
print('1 passed')
