from lib.util import fetch_data


def job_18():
    first = fetch_data('a18')
    return first + fetch_data('b18')
