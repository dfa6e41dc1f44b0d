from lib.util import fetch_data


def job_10():
    first = fetch_data('a10')
    return first + fetch_data('b10')
