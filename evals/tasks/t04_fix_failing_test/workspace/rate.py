def charge(amount):
    return amount * 2
